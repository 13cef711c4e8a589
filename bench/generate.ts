/**
 * New tokens per second of batched KV-cache sampling at batch 1, 16 and 64, on a random model.
 *   npm run bench:generate                       small Llama-shaped model on the CPU backend (short run)
 *   npm run bench:generate -- --backend wasm     same model on another backend
 *   npm run bench:generate -- --qwen05b          Qwen2-0.5B-shaped model, 128 prompt + 128 new tokens,
 *                                                on the best backend (WebGPU on a GPU host)
 *   npm run bench:generate -- --backend wasm --shared-prefix 382
 *                                                every prompt starts with the same 382 tokens (a system
 *                                                prompt), which the sampler runs once and shares
 * Flags: --shape NAME (lib/model/shapes.ts) --vocab N --weights-dtype fp32|bf16  --batches 1,16,64  --prompt N
 *        --new N  --shared-prefix N  --json
 */
import { useBackend } from "../lib/backend/select.js";
import { generate, type GenerateStats } from "../lib/model/generate.js";
import { randomModel } from "../lib/model/random-model.js";
import { shapeParams } from "../lib/model/shapes.js";
import { tf } from "../lib/backend/tf.js";
import { benchShape, benchWeightsDtype, flag } from "./args.js";

async function main(): Promise<void> {
  const { config, big, name } = benchShape();
  const choice = await useBackend(flag("--backend") ?? (big ? "auto" : "cpu"));
  const weightsDtype = benchWeightsDtype();
  const batches = (flag("--batches") ?? "1,16,64").split(",").map(Number);
  const promptLen = Number(flag("--prompt") ?? (big ? 128 : 16));
  const newTokens = Number(flag("--new") ?? (big ? 128 : 16));
  const sharedLen = Number(flag("--shared-prefix") ?? 0);
  const t0 = Date.now();
  const model = randomModel(config, { seed: 1, weightsDtype: weightsDtype === "bf16" ? "bf16" : "fp32" });
  await model.logitsOf([1, 2, 3]); // warm-up: kernels compile, weights reach the device
  const loadS = (Date.now() - t0) / 1000;
  process.stderr.write(`backend ${choice.backend} ready after ${loadS.toFixed(1)} s (skipped: ${JSON.stringify(choice.skipped)})\n`);
  const rows: Record<string, unknown>[] = [];
  for (const B of batches) {
    // distinct prompts after the optional common prefix, so nothing else shortens the prefill
    const common = Array.from({ length: sharedLen }, (_, i) => (i * 37 + 5) % config.vocabSize);
    const prompts = Array.from({ length: B }, (_, b) => common.concat(Array.from({ length: promptLen }, (_, i) => (b * 7919 + i * 104729 + 1) % config.vocabSize)));
    const stats: GenerateStats = { prefixTokens: 0, steps: 0 };
    const start = Date.now();
    const out = await generate(model, prompts, { temperature: 1, seed: 0, maxTokens: newTokens, eosIds: [] }, stats);
    const seconds = (Date.now() - start) / 1000;
    const made = out.reduce((s, g) => s + g.ids.length, 0);
    const row = { batch: B, shared_prefix: stats.prefixTokens, prompt: promptLen, new_per_seq: newTokens, new_tokens: made, seconds: Number(seconds.toFixed(3)), new_tokens_per_s: Number((made / seconds).toFixed(1)) };
    rows.push(row);
    // each row as soon as it is measured, so a run stopped early still reports what it finished
    process.stderr.write(`row ${JSON.stringify({ backend: choice.backend, ...row })}\n`);
  }
  const summary = { backend: choice.backend, skipped: choice.skipped, model: `${name} (random, vocab ${config.vocabSize}, ${weightsDtype} weights)`, params: shapeParams(config), setup_s: loadS, rows, tensors_after: tf.memory().numTensors };
  if (process.argv.includes("--json")) process.stdout.write(JSON.stringify(summary) + "\n");
  else {
    process.stdout.write(`backend ${summary.backend}; model ${summary.model}; ${summary.params} parameters; setup ${loadS.toFixed(1)} s\n`);
    process.stdout.write("batch  shared  prompt  new/seq  new tokens  seconds  new tokens/s\n");
    for (const r of rows) process.stdout.write(`${String(r.batch).padStart(5)}  ${String(r.shared_prefix).padStart(6)}  ${String(r.prompt).padStart(6)}  ${String(r.new_per_seq).padStart(7)}  ${String(r.new_tokens).padStart(10)}  ${String(r.seconds).padStart(7)}  ${String(r.new_tokens_per_s).padStart(12)}\n`);
  }
  model.dispose();
}

main().catch((e) => {
  process.stderr.write(`${e instanceof Error ? e.stack : String(e)}\n`);
  process.exit(1);
});
