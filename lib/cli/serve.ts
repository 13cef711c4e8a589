/** `t2s serve`: the OpenAI-compatible server over a local model and its adapters. */
import type { Command } from "commander";
import { UsageError } from "../core/errors.js";
import { collect, intOption } from "./options.js";
import { WEIGHTS_DTYPE_HELP, weightsDtypeOption, type WeightsDtype } from "../model/weights-dtype.js";

/** Parses `--adapter NAME=DIR` values into a name -> folder map (names must be unique). */
export function parseAdapterFlags(values: string[]): Record<string, string> {
  const out: Record<string, string> = {};
  for (const v of values) {
    const i = v.indexOf("=");
    if (i <= 0 || i === v.length - 1) throw new UsageError(`--adapter must look like NAME=DIR, got '${v}'`);
    const name = v.slice(0, i);
    if (out[name]) throw new UsageError(`--adapter name '${name}' is given twice`);
    out[name] = v.slice(i + 1);
  }
  return out;
}

export function registerServe(program: Command): void {
  program
    .command("serve")
    .description("serve a local model (and LoRA adapters) over the OpenAI and vLLM HTTP protocols")
    .requiredOption("--model <dir>", "Hugging Face model folder (needs a chat template)")
    .option("--name <name>", "name the base model is served under (default: the folder name)")
    .option("--adapter <name=dir>", "serve a PEFT LoRA adapter under its own name (repeatable)", collect, [])
    .option("--port <n>", "port to listen on (0 = any free port)", intOption("--port", 0, 65535), 8000)
    .option("--host <host>", "interface to listen on", "127.0.0.1")
    .option("--backend <name>", "tfjs backend: auto, webgpu, tensorflow, wasm, cpu (default auto)")
    .option("--weights-dtype <d>", WEIGHTS_DTYPE_HELP, weightsDtypeOption)
    .option("--max-model-len <n>", "longest prompt + completion in tokens (default: max_position_embeddings)", intOption("--max-model-len", 1))
    .option("--max-batch <rows>", "sequences decoded together; later requests wait their turn in arrival order", intOption("--max-batch", 1), 64)
    .option("--max-num-batched-tokens <n>", "prompt tokens prefilled in one step at most (smaller: a burst of requests stalls running streams less)", intOption("--max-num-batched-tokens", 1), 8192)
    .action(async (opts: { model: string; name?: string; adapter: string[]; port: number; host: string; backend?: string; weightsDtype?: WeightsDtype; maxModelLen?: number; maxBatch: number; maxNumBatchedTokens: number }) => {
      const adapters = parseAdapterFlags(opts.adapter);
      const { assertTokenizerFile, describeLoad, loadModel } = await import("../model/load.js");
      assertTokenizerFile(opts.model);
      const { startServer } = await import("../serve/server.js");
      const model = await loadModel(opts.model, { backend: opts.backend, name: opts.name, contextLength: opts.maxModelLen, weightsDtype: opts.weightsDtype });
      process.stderr.write(`${describeLoad(model)}\n`);
      const server = await startServer({ model, adapters, port: opts.port, host: opts.host, maxBatch: opts.maxBatch, maxPrefillTokens: opts.maxNumBatchedTokens });
      process.stdout.write(`serving ${[...server.engine.models.keys()].join(", ")} at ${server.url}/v1 (backend ${model.backend})\n`);
      await new Promise<void>((resolve) => {
        const stop = () => resolve();
        process.once("SIGINT", stop);
        process.once("SIGTERM", stop);
      });
      await server.close();
      model.dispose();
    });
}
