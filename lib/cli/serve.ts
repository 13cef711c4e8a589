/** `t2s serve`: the OpenAI-compatible server over a local model and its adapters. */
import { applyQuantization, QUANTIZATION_HELP, quantizationOption, type QuantizationName } from "../model/quantization.js";
import type { Command } from "commander";
import { UsageError } from "../core/errors.js";
import { collect, intOption, oneOf } from "./options.js";
import { WEIGHTS_DTYPE_HELP, weightsDtypeOption, type WeightsDtype } from "../model/weights-dtype.js";
import { ADAPTER_LIMIT_FLAGS, ADAPTER_LIMITS } from "../model/lora-read.js";

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
    .option("--quantization <q>", `${QUANTIZATION_HELP} (default none; adapters stay float32 beside an int8 base)`, quantizationOption)
    .option("--max-model-len <n>", "longest prompt + completion in tokens (default: max_position_embeddings)", intOption("--max-model-len", 1))
    .option("--max-batch <rows>", "sequences decoded together; later requests wait their turn in arrival order", intOption("--max-batch", 1), 64)
    .option("--max-num-batched-tokens <n>", "prompt tokens prefilled in one step at most (smaller: a burst of requests stalls running streams less)", intOption("--max-num-batched-tokens", 1), 8192)
    .option("--api-key <key>", "require 'Authorization: Bearer <key>' on every route but /health and /metrics (default: $VLLM_API_KEY)")
    .option("--enable-lora-updating", "serve POST /v1/load_lora_adapter and /v1/unload_lora_adapter (default: $VLLM_ALLOW_RUNTIME_LORA_UPDATING)")
    .option("--max-loras <n>", "adapters served at once at most", intOption("--max-loras", 0), 8)
    .option("--lora-root <dir>", "folder a runtime adapter must lie under, every file of it included (repeatable; default: any folder with adapter_config.json)", collect, [])
    .option(`${ADAPTER_LIMIT_FLAGS.rank} <n>`, "rank of a LoRA pair at most, for every adapter served", intOption(ADAPTER_LIMIT_FLAGS.rank, 1), ADAPTER_LIMITS.rank)
    .option(`${ADAPTER_LIMIT_FLAGS.weightsBytes} <n>`, "bytes of an adapter_model.safetensors at most", intOption(ADAPTER_LIMIT_FLAGS.weightsBytes, 1), ADAPTER_LIMITS.weightsBytes)
    .option(`${ADAPTER_LIMIT_FLAGS.configBytes} <n>`, "bytes of an adapter_config.json at most", intOption(ADAPTER_LIMIT_FLAGS.configBytes, 1), ADAPTER_LIMITS.configBytes)
    .option("--allow-base-mismatch", "serve adapters recorded as trained on another base model (refused by default)")
    .option("--max-connections <n>", "open connections at most; past it idle ones are closed first", intOption("--max-connections", 1), 1024)
    .option("--shutdown-timeout <s>", "on SIGTERM/SIGINT, seconds in-flight requests may take to finish before they are cut", intOption("--shutdown-timeout", 0), 30)
    .option("--logprobs-mode <mode>", "logprobs reported: raw_logprobs (the model's, vLLM's default) or processed_logprobs (after bias, mask and temperature)", "raw_logprobs")
    .action(async (opts: ServeFlags) => {
      const adapters = parseAdapterFlags(opts.adapter);
      const logprobsMode = oneOf("--logprobs-mode", opts.logprobsMode, ["raw_logprobs", "processed_logprobs"] as const);
      const { assertTokenizerFile, describeLoad, loadModel } = await import("../model/load.js");
      assertTokenizerFile(opts.model);
      const { startServer } = await import("../serve/server.js");
      const model = await loadModel(opts.model, { backend: opts.backend, name: opts.name, contextLength: opts.maxModelLen, weightsDtype: opts.weightsDtype });
      applyQuantization(model, opts.quantization);
      process.stderr.write(`${describeLoad(model)}${model.quantization ? `; sampling ${model.quantization}` : ""}\n`);
      const server = await startServer({
        model, adapters, port: opts.port, host: opts.host, maxBatch: opts.maxBatch, maxPrefillTokens: opts.maxNumBatchedTokens,
        apiKey: opts.apiKey, allowRuntimeLora: opts.enableLoraUpdating || undefined, maxLoras: opts.maxLoras, loraRoots: opts.loraRoot.length ? opts.loraRoot : undefined,
        adapterLoading: { limits: { rank: opts.maxLoraRank, weightsBytes: opts.maxLoraBytes, configBytes: opts.maxLoraConfigBytes }, allowBaseMismatch: opts.allowBaseMismatch === true },
        connections: { maxConnections: opts.maxConnections }, shutdownTimeoutMs: opts.shutdownTimeout * 1000, logprobsMode,
      });
      process.stdout.write(`serving ${[...server.engine.models.keys()].join(", ")} at ${server.url}/v1 (backend ${model.backend})\n`);
      await new Promise<void>((resolve) => {
        const stop = (signal: string) => {
          process.stderr.write(`${signal}: no new requests; waiting up to ${opts.shutdownTimeout} s for ${server.inFlight()} in flight (a second signal cuts them now)\n`);
          // a second signal cuts what is still running at once
          process.once("SIGINT", () => void server.close(0));
          process.once("SIGTERM", () => void server.close(0));
          resolve();
        };
        process.once("SIGINT", () => stop("SIGINT"));
        process.once("SIGTERM", () => stop("SIGTERM"));
      });
      await server.close();
      model.dispose();
    });
}

interface ServeFlags {
  model: string;
  name?: string;
  adapter: string[];
  port: number;
  host: string;
  backend?: string;
  weightsDtype?: WeightsDtype;
  quantization?: QuantizationName;
  maxModelLen?: number;
  maxBatch: number;
  maxNumBatchedTokens: number;
  apiKey?: string;
  enableLoraUpdating?: boolean;
  maxLoras: number;
  loraRoot: string[];
  maxLoraRank: number;
  maxLoraBytes: number;
  maxLoraConfigBytes: number;
  allowBaseMismatch?: boolean;
  maxConnections: number;
  shutdownTimeout: number;
  logprobsMode: string;
}
