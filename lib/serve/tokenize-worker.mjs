// A worker thread of `t2s serve` that tokenizes prompts off the HTTP event loop (lib/serve/tokenize-pool.ts).
// Plain JavaScript so it starts without tsx and runs the same from the sources, dist/ or a bundle: it builds
// the tokenizer from the model folder's tokenizer.json and tokenizer_config.json exactly as
// lib/model/tokenizer.ts does, so its ids are the in-thread tokenizer's.
import { readFileSync, existsSync } from "node:fs";
import { join } from "node:path";
import { parentPort, workerData } from "node:worker_threads";
import { Tokenizer } from "@huggingface/tokenizers";

const dir = workerData.dir;
const cfgFile = join(dir, "tokenizer_config.json");
const cfg = existsSync(cfgFile) ? JSON.parse(readFileSync(cfgFile, "utf8")) : {};
const tok = new Tokenizer(JSON.parse(readFileSync(join(dir, "tokenizer.json"), "utf8")), cfg);

parentPort.on("message", (job) => {
  try {
    const ids = tok.encode(job.text, { add_special_tokens: job.addSpecialTokens }).ids;
    parentPort.postMessage({ id: job.id, ids: Int32Array.from(ids) });
  } catch (e) {
    parentPort.postMessage({ id: job.id, error: e instanceof Error ? e.message : String(e) });
  }
});
parentPort.postMessage({ ready: true });
