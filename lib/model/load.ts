/**
 * Loading a Hugging Face model folder (config.json, safetensors weights, tokenizer.json, chat template)
 * into a CausalLM, and building one from named float32 tensors (random models, tests, benchmarks).
 */
import { existsSync } from "node:fs";
import { basename, resolve } from "node:path";
import { T2sError } from "../core/errors.js";
import { useBackend } from "../backend/select.js";
import { expectedShapes, readConfig, type ModelConfig } from "./config.js";

export { expectedShapes };
import type { DecoderWeights, LayerWeights, Linear } from "./decoder.js";
import { CausalLM } from "./model.js";
import { assertFinite, assertFinite16, forEachCheckpointTensor, widenRaw, type FloatTensor, type RawTensor } from "./safetensors.js";
import { packedFromRaw, type PackedWeight, type WeightMatrix } from "./packed.js";
import { WEIGHTS_DTYPE_DEFAULT, WEIGHTS_DTYPES, type WeightsDtype } from "./weights-dtype.js";
import { tf } from "../backend/tf.js";
import { uploadNow } from "../backend/upload.js";
import { loadTokenizer, type ChatTokenizer } from "./tokenizer.js";
import { applyQuantization, type QuantizationName } from "./quantization.js";
import { applyKvCacheDtype } from "./engine/runners.js";
import type { KvCacheDtypeName } from "./kv-cache-dtype.js";

export interface LoadOptions {
  /** tfjs backend: auto (default, or T2S_BACKEND), webgpu, tensorflow, wasm, cpu. */
  backend?: string;
  /** Name the model is served under (default: the folder's base name). */
  name?: string;
  /** Longest prompt + completion allowed (default: config.json's max_position_embeddings). */
  contextLength?: number;
  /**
   * How weight matrices are stored on the device: auto (default) keeps a bf16/f16 checkpoint 16-bit on
   * WebGPU and widens it elsewhere; fp32 always widens; bf16 packs every matrix (rounding float32 ones).
   */
  weightsDtype?: WeightsDtype;
}

/** Throws T2sError("bad_checkpoint") when a checkpoint holds layers config.json does not describe. */
function assertLayerInConfig(c: ModelConfig, name: string, source: string): void {
  const layer = /^model\.layers\.(\d+)\./.exec(name);
  if (layer && Number(layer[1]) >= c.numLayers) {
    throw new T2sError("bad_checkpoint", `${source}: the checkpoint holds tensor ${name} but config.json says num_hidden_layers ${c.numLayers}; a config with fewer layers than the weights would run a truncated model`);
  }
}

/** Throws T2sError("bad_checkpoint") when tensor `name` is missing or its shape is not what `c` implies. */
function assertShape(name: string, shape: number[], want: number[] | undefined, c: ModelConfig, source: string): void {
  if (!want) return;
  if (shape.length !== want.length || shape.some((d, i) => d !== want[i])) {
    throw new T2sError("bad_checkpoint", `${source}: tensor ${name} has shape [${shape}] but config.json implies [${want}]`);
  }
}

function missing(name: string, c: ModelConfig, source: string): T2sError {
  return new T2sError("bad_checkpoint", `${source}: tensor ${name} is missing (config.json describes a ${c.architecture} with ${c.numLayers} layers)`);
}

/** Decoder weights from a lookup of device tensors by HF name (every expected name present). */
function assemble(c: ModelConfig, get: (name: string) => tf.Tensor | PackedWeight): DecoderWeights {
  const vec = (name: string) => get(name) as tf.Tensor1D;
  const mat = (name: string) => get(name) as WeightMatrix;
  const lin = (p: string, bias: boolean): Linear => ({ weight: mat(`${p}.weight`), bias: bias ? vec(`${p}.bias`) : undefined });
  const layers: LayerWeights[] = [];
  for (let i = 0; i < c.numLayers; i++) {
    const p = `model.layers.${i}.`;
    layers.push({
      inputNorm: vec(`${p}input_layernorm.weight`),
      postNorm: vec(`${p}post_attention_layernorm.weight`),
      q: lin(`${p}self_attn.q_proj`, c.attentionBias),
      k: lin(`${p}self_attn.k_proj`, c.attentionBias),
      v: lin(`${p}self_attn.v_proj`, c.attentionBias),
      o: lin(`${p}self_attn.o_proj`, false),
      gate: lin(`${p}mlp.gate_proj`, c.mlpBias),
      up: lin(`${p}mlp.up_proj`, c.mlpBias),
      down: lin(`${p}mlp.down_proj`, c.mlpBias),
      qNorm: c.qkNorm ? vec(`${p}self_attn.q_norm.weight`) : undefined,
      kNorm: c.qkNorm ? vec(`${p}self_attn.k_norm.weight`) : undefined,
    });
  }
  return {
    embed: mat("model.embed_tokens.weight"),
    layers,
    norm: vec("model.norm.weight"),
    // a tied checkpoint may still carry lm_head; the embeddings are what transformers uses then
    lmHead: c.tieWordEmbeddings ? undefined : mat("lm_head.weight"),
  };
}

/**
 * Returns decoder weights built from HF-named float32 tensors, checking every tensor's presence and shape
 * (`source` names the folder in errors). Tensors the decoder does not use (rotary buffers) are ignored.
 */
export function buildWeights(c: ModelConfig, named: Map<string, FloatTensor | { shape: number[]; data: Float32Array }>, source: string): DecoderWeights {
  const shapes = expectedShapes(c);
  for (const name of named.keys()) assertLayerInConfig(c, name, source);
  for (const [name, shape] of shapes) {
    const t = named.get(name);
    if (!t) throw missing(name, c, source);
    assertShape(name, t.shape, shape, c, source);
  }
  if (c.tieWordEmbeddings && named.has("lm_head.weight")) assertShape("lm_head.weight", named.get("lm_head.weight")!.shape, [c.vocabSize, c.hiddenSize], c, source);
  return assemble(c, (name) => {
    const t = named.get(name)!;
    return tf.tensor(t.data, t.shape);
  });
}

/** Weight matrices (as opposed to norms and biases): the tensors 16-bit storage packs. */
function isMatrix(name: string): boolean {
  return name === "model.embed_tokens.weight" || name === "lm_head.weight" || /\.(q|k|v|o|gate|up|down)_proj\.weight$/.test(name);
}

/** What a checkpoint load put on the device. */
export interface LoadedWeights {
  weights: DecoderWeights;
  /** Bytes of the weights on the device, and how many of them are 16-bit packed. */
  bytes: number;
  packedBytes: number;
  /** Files read, and the dtype most of the checkpoint's matrices are stored in. */
  files: number;
  checkpointDtype: string;
}

/**
 * Reads a checkpoint folder tensor by tensor onto the device: each tensor is checked, made a device tensor
 * (matrices 16-bit packed where `pack` says so) and its host bytes dropped before the next is read.
 */
export function loadCheckpointWeights(c: ModelConfig, dir: string, pack: (raw: RawTensor) => boolean): LoadedWeights {
  const shapes = expectedShapes(c);
  const got = new Map<string, tf.Tensor | PackedWeight>();
  let bytes = 0;
  let packedBytes = 0;
  const dtypes = new Map<string, number>();
  try {
    const files = forEachCheckpointTensor(dir, (name, raw, file) => {
      assertLayerInConfig(c, name, dir);
      const want = shapes.get(name);
      // tied embeddings: a stored lm_head is checked but never used
      if (!want) {
        if (name === "lm_head.weight" && c.tieWordEmbeddings) assertShape(name, raw.shape, [c.vocabSize, c.hiddenSize], c, dir);
        return;
      }
      assertShape(name, raw.shape, want, c, dir);
      if (isMatrix(name)) dtypes.set(raw.dtype, (dtypes.get(raw.dtype) ?? 0) + 1);
      if (isMatrix(name) && pack(raw)) {
        if (raw.dtype !== "F32") assertFinite16(raw, name, file);
        else assertFinite(widenRaw(raw, name, file).data, name, file);
        const p = packedFromRaw(raw, name);
        uploadNow(p.words);
        got.set(name, p);
        packedBytes += p.bytes;
        bytes += p.bytes;
        return;
      }
      const t = widenRaw(raw, name, file);
      got.set(name, uploadNow(tf.tensor(t.data, t.shape)));
      bytes += t.data.byteLength;
      // unused tensors (rotary buffers) are never read; layer names are checked whether used or not
    }, (name) => {
      assertLayerInConfig(c, name, dir);
      return shapes.has(name) || name === "lm_head.weight";
    });
    for (const name of shapes.keys()) if (!got.has(name)) throw missing(name, c, dir);
    const checkpointDtype = [...dtypes.entries()].sort((a, b) => b[1] - a[1])[0]?.[0] ?? "F32";
    return { weights: assemble(c, (name) => got.get(name)!), bytes, packedBytes, files, checkpointDtype };
  } catch (e) {
    for (const t of got.values()) t.dispose();
    throw e;
  }
}

/**
 * Throws T2sError("no_tokenizer") when a model folder that is to chat (serve, benchmark, train) has no
 * tokenizer.json: said as such, before the model loads, rather than as a missing chat template later.
 */
export function assertTokenizerFile(dir: string): void {
  const abs = resolve(dir);
  // a folder that is not a model at all is loadModel's to report (no config.json)
  if (existsSync(resolve(abs, "config.json")) && !existsSync(resolve(abs, "tokenizer.json"))) {
    throw new T2sError("no_tokenizer", `model folder ${dir} has no tokenizer.json; copy the tokenizer files (tokenizer.json, tokenizer_config.json) of the model into it`);
  }
}

/** A model folder's description without its weights: what a server's HTTP thread needs of a model. */
export interface ModelFolder {
  /** The folder's absolute path. */
  dir: string;
  /** The served name (LoadOptions.name, else the folder's base name). */
  name: string;
  /** config.json, with maxPositions set to the context length when one is given. */
  config: ModelConfig;
  tokenizer: ChatTokenizer | null;
}

/** Reads a model folder's config.json and tokenizer (no weights, no backend). */
export function readModelFolder(dir: string, opts: Pick<LoadOptions, "name" | "contextLength"> = {}): ModelFolder {
  const abs = resolve(dir);
  if (!existsSync(abs)) throw new T2sError("missing_file", `model folder ${dir} does not exist`);
  const config = readConfig(abs);
  if (opts.contextLength !== undefined) {
    if (!Number.isInteger(opts.contextLength) || opts.contextLength < 1) throw new T2sError("usage", `context length must be a positive integer, got ${opts.contextLength}`);
    config.maxPositions = opts.contextLength;
  }
  const tokenizer: ChatTokenizer | null = existsSync(resolve(abs, "tokenizer.json")) ? loadTokenizer(abs, config.eosTokenIds) : null;
  return { dir: abs, name: opts.name ?? basename(abs), config, tokenizer };
}

/** Loads a Hugging Face model folder and returns the model on the chosen backend (model.backend says which). */
export async function loadModel(dir: string, opts: LoadOptions = {}): Promise<CausalLM> {
  const abs = resolve(dir);
  if (!existsSync(abs)) throw new T2sError("missing_file", `model folder ${dir} does not exist`);
  const choice = await useBackend(opts.backend);
  const { config, tokenizer, name } = readModelFolder(abs, opts);
  const want = (opts.weightsDtype ?? process.env.T2S_WEIGHTS_DTYPE ?? WEIGHTS_DTYPE_DEFAULT) as WeightsDtype;
  if (!WEIGHTS_DTYPES.includes(want)) throw new T2sError("usage", `weights dtype (--weights-dtype, weights_dtype, T2S_WEIGHTS_DTYPE) must be one of ${WEIGHTS_DTYPES.join(", ")}, got ${want}`);
  // auto keeps a 16-bit checkpoint 16-bit where kernels widen it (WebGPU); bf16 packs on any backend
  const pack = (raw: RawTensor) => want === "bf16" || (want === "auto" && choice.backend === "webgpu" && raw.dtype !== "F32");
  const started = performance.now();
  const loaded = loadCheckpointWeights(config, abs, pack);
  const model = new CausalLM(config, loaded.weights, tokenizer, { name, dir: abs, backend: choice.backend });
  model.loadInfo = {
    seconds: (performance.now() - started) / 1000,
    weightBytes: loaded.bytes,
    packedBytes: loaded.packedBytes,
    files: loaded.files,
    checkpointDtype: loaded.checkpointDtype,
    storage: loaded.packedBytes === 0 ? "fp32" : loaded.packedBytes === loaded.bytes ? "16-bit" : "16-bit matrices",
  };
  return model;
}

/** One line saying what a load put where and how long it took (for the commands' stderr). */
export function describeLoad(model: CausalLM): string {
  const i = model.loadInfo;
  if (!i) return `model ${model.name} on ${model.backend}`;
  const gb = (b: number) => (b / 1e9).toFixed(2);
  return `loaded ${model.name} on ${model.backend}: ${gb(i.weightBytes)} GB of weights (${i.storage}; checkpoint ${i.checkpointDtype}, ${i.files} file${i.files === 1 ? "" : "s"}) in ${i.seconds.toFixed(1)} s`;
}

/**
 * A model loaded to sample from (a served base, a benchmark's policy): its weights, then the sampling
 * quantization and the KV cache's storage; a setting this model cannot take is refused and the model freed.
 */
export async function loadForSampling(dir: string, opts: LoadOptions & { quantization?: QuantizationName; kvCacheDtype?: KvCacheDtypeName } = {}): Promise<CausalLM> {
  const model = await loadModel(dir, opts);
  try {
    applyQuantization(model, opts.quantization);
    applyKvCacheDtype(model, opts.kvCacheDtype);
  } catch (e) {
    model.dispose();
    throw e;
  }
  return model;
}
