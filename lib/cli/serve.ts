/** `t2s serve`: the OpenAI-compatible server over a local model and its adapters. */
import { QUANTIZATION_HELP, quantizationOption, type QuantizationName } from "../model/quantization.js";
import { KV_CACHE_DTYPE_HELP, kvCacheDtypeOption, type KvCacheDtypeName } from "../model/kv-cache-dtype.js";
import type { Command } from "commander";
import { UsageError } from "../core/errors.js";
import { collect, intOption, numberOption, oneOf } from "./options.js";
import { WEIGHTS_DTYPE_HELP, weightsDtypeOption, type WeightsDtype } from "../model/weights-dtype.js";
import { ADAPTER_LIMIT_FLAGS, ADAPTER_LIMITS } from "../model/lora-read.js";
import { apiKeyOption, CONNECTION_LIMITS } from "../serve/http-guard.js";
import { REQUEST_LIMITS } from "../serve/limits.js";
import { GUIDED_LIMITS } from "../model/guided-schema.js";
import { serveUntilSignal, SHUTDOWN_TIMEOUT_S } from "../serve/shutdown.js";
import { ENGINE_THREAD_DEFAULT, ENGINE_THREAD_MODES } from "../serve/engine-thread/protocol.js";

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
    .option("--kv-cache-dtype <d>", `${KV_CACHE_DTYPE_HELP} (default auto)`, kvCacheDtypeOption)
    .option("--max-model-len <n>", "longest prompt + completion in tokens (default: max_position_embeddings)", intOption("--max-model-len", 1))
    .option("--engine-thread <where>", `where the model's weights and generation engine run: worker (a thread of their own, so /health, /metrics and the streams never wait for a decode step) or main (the HTTP server's thread)`, ENGINE_THREAD_DEFAULT)
    .option("--max-batch <rows>", "sequences decoded together; later requests wait their turn in arrival order", intOption("--max-batch", 1), 64)
    .option("--max-num-batched-tokens <n>", "prompt tokens prefilled in one step at most (smaller: a burst of requests stalls running streams less)", intOption("--max-num-batched-tokens", 1), 8192)
    .option("--enable-prefix-caching", "keep prompts' keys and values across requests and prefill only what a new prompt does not share with a stored one (default)")
    .option("--no-enable-prefix-caching", "recompute every prompt (prompts are shared only within one prefill call)")
    .option("--api-key <key>", "require 'Authorization: Bearer <key>' on every route but /health, which then says only {status} to requests without it (default: $VLLM_API_KEY; an empty key is refused)")
    .option("--allowed-host <name>", "without a key, also answer requests whose Host header names this (repeatable; '*' = any); by default only localhost, 127.0.0.1, [::1] and the --host address, against DNS rebinding", collect, [])
    .option("--enable-lora-updating", "serve POST /v1/load_lora_adapter and /v1/unload_lora_adapter (default: $VLLM_ALLOW_RUNTIME_LORA_UPDATING)")
    .option("--max-loras <n>", "adapters served at once at most", intOption("--max-loras", 0), 8)
    .option("--lora-root <dir>", "folder a runtime adapter must lie under, every file of it included (repeatable; default: any folder with adapter_config.json)", collect, [])
    .option(`${ADAPTER_LIMIT_FLAGS.rank} <n>`, "rank of a LoRA pair at most, for every adapter served", intOption(ADAPTER_LIMIT_FLAGS.rank, 1), ADAPTER_LIMITS.rank)
    .option(`${ADAPTER_LIMIT_FLAGS.weightsBytes} <n>`, "bytes of an adapter_model.safetensors at most", intOption(ADAPTER_LIMIT_FLAGS.weightsBytes, 1), ADAPTER_LIMITS.weightsBytes)
    .option(`${ADAPTER_LIMIT_FLAGS.configBytes} <n>`, "bytes of an adapter_config.json at most", intOption(ADAPTER_LIMIT_FLAGS.configBytes, 1), ADAPTER_LIMITS.configBytes)
    .option("--allow-base-mismatch", "serve adapters recorded as trained on another base model (refused by default)")
    .option("--max-connections <n>", "open connections at most, busy ones included; past it the one doing no work for the longest (idle, or still sending its request) is closed, else the new one gets a 503", intOption("--max-connections", 1), CONNECTION_LIMITS.maxConnections)
    .option("--request-timeout <s>", "seconds a request's body may take to arrive after its headers (a slow body is cut like slow headers); streamed responses are not limited", numberOption("--request-timeout", { gt: 0 }), CONNECTION_LIMITS.requestMs / 1000)
    .option("--max-completion-prompts <n>", "prompts in one /v1/completions request at most (vLLM's VLLM_MAX_COMPLETION_PROMPTS)", intOption("--max-completion-prompts", 1), REQUEST_LIMITS.maxPrompts)
    .option("--max-request-sequences <n>", "sequences one request may make at most: prompts x n", intOption("--max-request-sequences", 1), REQUEST_LIMITS.maxSequences)
    .option("--guided-max-schema-bytes <n>", "bytes of JSON a guided-decoding schema (response_format, guided_json, forced tools) may have", intOption("--guided-max-schema-bytes", 1), GUIDED_LIMITS.maxSchemaBytes)
    .option("--guided-max-depth <n>", "levels a guided-decoding schema may nest ($ref hops and pattern groups count)", intOption("--guided-max-depth", 1, 256), GUIDED_LIMITS.maxDepth)
    .option("--guided-compile-timeout <s>", "seconds a schema never seen before may take to compile (in a worker thread, replaced past it)", numberOption("--guided-compile-timeout", { gt: 0 }), GUIDED_LIMITS.compileTimeoutMs / 1000)
    .option("--shutdown-timeout <s>", "on SIGTERM/SIGINT, seconds in-flight requests may take to finish before they are cut", intOption("--shutdown-timeout", 0), SHUTDOWN_TIMEOUT_S)
    .option("--logprobs-mode <mode>", "logprobs reported: raw_logprobs (the model's, vLLM's default) or processed_logprobs (after bias, mask and temperature)", "raw_logprobs")
    .action(async (opts: ServeFlags) => {
      // a blank key would start a server that checks nothing: refused before the model loads
      if (opts.apiKey !== undefined) apiKeyOption(opts.apiKey, "--api-key");
      else apiKeyOption(process.env.VLLM_API_KEY || undefined, "VLLM_API_KEY");
      const adapters = parseAdapterFlags(opts.adapter);
      const logprobsMode = oneOf("--logprobs-mode", opts.logprobsMode, ["raw_logprobs", "processed_logprobs"] as const);
      const engineThread = oneOf("--engine-thread", opts.engineThread, ENGINE_THREAD_MODES);
      const { assertTokenizerFile } = await import("../model/load.js");
      assertTokenizerFile(opts.model);
      const { startServer } = await import("../serve/server.js");
      const server = await startServer({
        load: { dir: opts.model, backend: opts.backend, name: opts.name, contextLength: opts.maxModelLen, weightsDtype: opts.weightsDtype, quantization: opts.quantization, kvCacheDtype: opts.kvCacheDtype },
        engineThread,
        adapters, port: opts.port, host: opts.host, maxBatch: opts.maxBatch, maxPrefillTokens: opts.maxNumBatchedTokens, enablePrefixCaching: opts.enablePrefixCaching,
        apiKey: opts.apiKey, allowedHosts: opts.allowedHost, allowRuntimeLora: opts.enableLoraUpdating || undefined, maxLoras: opts.maxLoras, loraRoots: opts.loraRoot.length ? opts.loraRoot : undefined,
        adapterLoading: { limits: { rank: opts.maxLoraRank, weightsBytes: opts.maxLoraBytes, configBytes: opts.maxLoraConfigBytes }, allowBaseMismatch: opts.allowBaseMismatch === true },
        connections: { maxConnections: opts.maxConnections, requestMs: opts.requestTimeout * 1000 }, shutdownTimeoutMs: opts.shutdownTimeout * 1000, logprobsMode,
        requestLimits: { maxPrompts: opts.maxCompletionPrompts, maxSequences: opts.maxRequestSequences },
        guidedLimits: { maxSchemaBytes: opts.guidedMaxSchemaBytes, maxDepth: opts.guidedMaxDepth, compileTimeoutMs: opts.guidedCompileTimeout * 1000 },
      });
      if (server.host.loaded) process.stderr.write(`${server.host.loaded}${server.host.mode === "worker" ? " (engine thread)" : ""}\n`);
      process.stdout.write(`serving ${[...server.engine.models.keys()].join(", ")} at ${server.url}/v1 (backend ${server.host.backend})\n`);
      await serveUntilSignal(server, { timeoutSeconds: opts.shutdownTimeout });
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
  kvCacheDtype?: KvCacheDtypeName;
  maxModelLen?: number;
  engineThread: string;
  maxBatch: number;
  maxNumBatchedTokens: number;
  enablePrefixCaching?: boolean;
  apiKey?: string;
  allowedHost: string[];
  enableLoraUpdating?: boolean;
  maxLoras: number;
  loraRoot: string[];
  maxLoraRank: number;
  maxLoraBytes: number;
  maxLoraConfigBytes: number;
  allowBaseMismatch?: boolean;
  maxConnections: number;
  requestTimeout: number;
  maxCompletionPrompts: number;
  maxRequestSequences: number;
  guidedMaxSchemaBytes: number;
  guidedMaxDepth: number;
  guidedCompileTimeout: number;
  shutdownTimeout: number;
  logprobsMode: string;
}
