/**
 * PEFT LoRA adapters: adapter_config.json (r, lora_alpha, target_modules, use_rslora, ...) and
 * adapter_model.safetensors with keys `base_model.model.model.layers.N.<self_attn|mlp>.<proj>.lora_A.weight`
 * (A [r, in], B [out, r]). Adapters attach unmerged (y = xW^T + s·(xA^T)B^T, for training), fold into a
 * merged copy of the weights (for serving), and save back in the same format. A key that names no module
 * of the model is an error, never silently ignored.
 */
import { mkdirSync, writeFileSync } from "node:fs";
import { basename, join, resolve } from "node:path";
import { T2sError } from "../core/errors.js";
import type { DecoderWeights, LayerWeights, Linear, LoraPair } from "./decoder.js";
import { dense, type WeightMatrix } from "./packed.js";
import { CausalLM, type AttachedAdapter } from "./model.js";
import { peftLoraKey } from "./lora-layout.js";
import { writeSafetensors, type FloatTensor } from "./safetensors.js";
import { pause, runAsync, runSync, type Io } from "./adapter-files.js";
import { recordMetadata } from "./base-record.js";
import { MODULES, readAdapterSteps, recordOfBase, type AdapterConfig, type AdapterLoadOptions, type AdapterPlan, type LoraBase } from "./lora-read.js";
import { tf } from "../backend/tf.js";
import { SeededRandom } from "../core/random.js";

export type { AdapterConfig, AdapterLoadOptions } from "./lora-read.js";

/** Returns the PEFT key of one LoRA matrix. */
export function loraKey(layer: number, module: string, which: "A" | "B"): string {
  return peftLoraKey(layer, MODULES[module].group, module, which);
}

/** A loaded model as the base adapters are read for (its record is cached on it). */
export function loraBase(model: CausalLM): LoraBase {
  return { name: model.name, config: model.config, dir: model.dir, cacheKey: model };
}

function describe(name: string, dir: string | null, config: AdapterConfig, pairs: { layer: number; module: string; scale: number }[]): AttachedAdapter {
  const keys = pairs.flatMap((p) => [loraKey(p.layer, p.module, "A"), loraKey(p.layer, p.module, "B")]);
  return { name, dir, r: config.r, alpha: config.lora_alpha, scale: pairs[0].scale, targetModules: [...new Set(pairs.map((p) => p.module))].sort(), keys, config };
}

/**
 * Attaches a PEFT adapter unmerged under `name` (default: the folder's name) and returns its description;
 * with `trainable`, A and B are tf.Variables the trainer can update. Apply it with the `adapter` option of
 * model.step / model.logits / generate. Reads the folder as every load does (lora-read.ts): an adapter
 * recorded for another base is refused unless `allowBaseMismatch`.
 */
export function attachAdapter(model: CausalLM, dir: string, opts: { name?: string; trainable?: boolean } & AdapterLoadOptions = {}): AttachedAdapter {
  const abs = resolve(dir);
  const name = opts.name ?? basename(abs);
  if (model.adapters.has(name)) throw new T2sError("adapter_exists", `an adapter named ${name} is already attached to ${model.name}`);
  const placed: { lin: Linear; pair: LoraPair }[] = [];
  let plan: AdapterPlan;
  try {
    plan = runSync(readAdapterSteps(abs, loraBase(model), opts, (p) => {
      const lin = model.weights.layers[p.layer][MODULES[p.module].field] as Linear;
      const a = tf.tensor2d(p.a.data, p.a.shape as [number, number]);
      const b = tf.tensor2d(p.b.data, p.b.shape as [number, number]);
      const pair: LoraPair = opts.trainable ? { a: tf.variable(a, true, `${name}/${loraKey(p.layer, p.module, "A")}`) as unknown as tf.Tensor2D, b: tf.variable(b, true, `${name}/${loraKey(p.layer, p.module, "B")}`) as unknown as tf.Tensor2D, scale: p.scale } : { a, b, scale: p.scale };
      if (opts.trainable) tf.dispose([a, b]);
      placed.push({ lin, pair });
    }));
  } catch (e) {
    for (const { pair } of placed) tf.dispose([pair.a, pair.b]);
    throw e;
  }
  for (const { lin, pair } of placed) {
    if (!lin.lora) lin.lora = new Map();
    lin.lora.set(name, pair);
  }
  const info = describe(name, abs, plan.config, plan.pairs);
  model.adapters.set(name, info);
  return info;
}

/**
 * Checks an adapter folder against a model as every load does (files, names, shapes, the recorded base)
 * without reading its tensors; returns what it found (throws what a load would throw).
 */
export function inspectAdapter(model: CausalLM, dir: string, opts: AdapterLoadOptions = {}): AdapterPlan {
  return runSync(readAdapterSteps(resolve(dir), loraBase(model), opts));
}

/**
 * Creates a fresh adapter (PEFT default init: A ~ U(-1/sqrt(in), 1/sqrt(in)), B = 0, so it starts as a
 * no-op) as trainable variables on the given modules of every layer, and returns its description.
 */
export function createAdapter(model: CausalLM, opts: { name: string; r: number; alpha: number; targetModules: string[]; seed: number; useRslora?: boolean }): AttachedAdapter {
  if (model.adapters.has(opts.name)) throw new T2sError("adapter_exists", `an adapter named ${opts.name} is already attached to ${model.name}`);
  for (const m of opts.targetModules) if (!MODULES[m]) throw new T2sError("usage", `unknown target module ${m}: use ${Object.keys(MODULES).join(", ")}`);
  const rand = new SeededRandom(opts.seed);
  const scale = opts.useRslora ? opts.alpha / Math.sqrt(opts.r) : opts.alpha / opts.r;
  const pairs: { layer: number; module: string; scale: number }[] = [];
  model.weights.layers.forEach((layer, i) => {
    for (const m of opts.targetModules) {
      const lin = layer[MODULES[m].field] as Linear;
      const [out, inp] = lin.weight.shape;
      const bound = 1 / Math.sqrt(inp);
      const a = Float32Array.from({ length: opts.r * inp }, () => (2 * rand.next() - 1) * bound);
      const pair: LoraPair = {
        a: tf.variable(tf.tensor2d(a, [opts.r, inp]), true, `${opts.name}/${loraKey(i, m, "A")}`) as unknown as tf.Tensor2D,
        b: tf.variable(tf.zeros([out, opts.r]), true, `${opts.name}/${loraKey(i, m, "B")}`) as unknown as tf.Tensor2D,
        scale,
      };
      if (!lin.lora) lin.lora = new Map();
      lin.lora.set(opts.name, pair);
      pairs.push({ layer: i, module: m, scale });
    }
  });
  const config: AdapterConfig = { r: opts.r, lora_alpha: opts.alpha, target_modules: [...opts.targetModules].sort(), use_rslora: opts.useRslora ?? false };
  const info = describe(opts.name, null, config, pairs);
  model.adapters.set(opts.name, info);
  return info;
}

/** Returns the attached pairs of an adapter keyed by PEFT key (A and B), in a stable order. */
export function adapterTensors(model: CausalLM, name: string): { key: string; tensor: tf.Tensor2D }[] {
  if (!model.adapters.has(name)) throw new T2sError("no_adapter", `no adapter named ${name} is attached to ${model.name}`);
  const out: { key: string; tensor: tf.Tensor2D }[] = [];
  model.weights.layers.forEach((layer, i) => {
    for (const m of Object.keys(MODULES)) {
      const pair = (layer[MODULES[m].field] as Linear).lora?.get(name);
      if (pair) out.push({ key: loraKey(i, m, "A"), tensor: pair.a }, { key: loraKey(i, m, "B"), tensor: pair.b });
    }
  });
  return out;
}

/**
 * The adapter_config.json of an attached adapter, the one writer of it (saveAdapter and the trainer's
 * checkpoints): the fields it came with, then what the kit knows of it. `lora_dropout` stays what the
 * adapter came with (0 for one the kit created), so a PEFT folder saved again reads as it was written.
 */
export function peftAdapterConfig(model: CausalLM, name: string): Record<string, unknown> {
  const info = model.adapters.get(name);
  if (!info) throw new T2sError("no_adapter", `no adapter named ${name} is attached to ${model.name}`);
  const base = (info.config ?? {}) as Partial<AdapterConfig>;
  return {
    ...base,
    peft_type: "LORA",
    task_type: "CAUSAL_LM",
    base_model_name_or_path: model.dir ?? model.name,
    r: info.r,
    lora_alpha: info.alpha,
    lora_dropout: base.lora_dropout ?? 0,
    target_modules: info.targetModules,
    bias: "none",
    fan_in_fan_out: false,
    inference_mode: true,
    use_rslora: base.use_rslora ?? false,
    use_dora: false,
  };
}

/**
 * The safetensors metadata of an adapter trained on `model`: the record of its base (base-record.ts), or
 * nothing for a model built in memory (no folder to record).
 */
export function adapterMetadata(model: CausalLM): Record<string, string> {
  const record = runSync(recordOfBase(loraBase(model)));
  return record ? recordMetadata(record) : {};
}

/**
 * Writes an attached adapter as a PEFT folder (adapter_config.json + adapter_model.safetensors). Async
 * because GPU backends can only read tensors back asynchronously.
 */
export async function saveAdapter(model: CausalLM, name: string, dir: string): Promise<void> {
  const config = peftAdapterConfig(model, name);
  mkdirSync(dir, { recursive: true });
  const tensors = new Map<string, { shape: number[]; data: Float32Array }>();
  for (const { key, tensor } of adapterTensors(model, name)) tensors.set(key, { shape: tensor.shape.slice(), data: (await tensor.data()) as Float32Array });
  writeSafetensors(join(dir, "adapter_model.safetensors"), tensors, { metadata: adapterMetadata(model) });
  writeFileSync(join(dir, "adapter_config.json"), JSON.stringify(config, null, 2) + "\n");
}

/** Removes an unmerged adapter from the model and releases its tensors. */
export function detachAdapter(model: CausalLM, name: string): void {
  if (!model.adapters.delete(name)) throw new T2sError("no_adapter", `no adapter named ${name} is attached to ${model.name}`);
  for (const layer of model.weights.layers) {
    for (const m of Object.keys(MODULES)) {
      const lin = layer[MODULES[m].field] as Linear;
      const pair = lin.lora?.get(name);
      if (pair) {
        tf.dispose([pair.a, pair.b]);
        lin.lora!.delete(name);
      }
    }
  }
}

/**
 * Multiply-adds computed between two turns of the event loop at most when folding a pair in (2^22: a few
 * milliseconds on wasm, about ten on the CPU backend, on an idle core): a pair of a large module and a high
 * rank is folded in row blocks.
 */
const MERGE_CHUNK_MACS = 2 ** 22;

/** W + s·B·A as a new float32 matrix, in row blocks with a pause between them when the product is large. */
function* mergedWeight(w: WeightMatrix, a: FloatTensor, b: FloatTensor, scale: number): Io<tf.Tensor2D> {
  const [out, r] = b.shape;
  const inp = a.shape[1];
  const rowsPer = Math.max(1, Math.floor(MERGE_CHUNK_MACS / Math.max(1, inp * r)));
  const A = tf.tensor2d(a.data, a.shape as [number, number]);
  const W = dense(w);
  const parts: tf.Tensor2D[] = [];
  let merged: tf.Tensor2D | null = null;
  try {
    for (let row = 0; row < out; row += rowsPer) {
      const rows = Math.min(rowsPer, out - row);
      // only this block's rows of B go to the device, never a copy of the whole matrix at once
      const Brows = b.data.subarray(row * r, (row + rows) * r);
      parts.push(tf.tidy(() => tf.add(rows === out ? W : tf.slice(W, [row, 0], [rows, inp]), tf.mul(tf.matMul(tf.tensor2d(Brows, [rows, r]), A), scale))) as tf.Tensor2D);
      if (row + rows < out) yield* pause();
    }
    merged = parts.length === 1 ? parts[0] : (tf.concat(parts, 0) as tf.Tensor2D);
    return merged;
  } finally {
    tf.dispose(parts.filter((p) => p !== merged));
    A.dispose();
    if ((W as unknown) !== w) W.dispose();
  }
}

/**
 * Returns a new model whose weights have the adapter folded in (W + s·B·A) for serving; the base model is
 * untouched and the two share every tensor the adapter does not change. `name` defaults to the folder name.
 * Reads off the event loop, one pair at a time with a turn of the loop between pairs, as every load does
 * (lora-read.ts): a server keeps answering while it runs, and only one pair's data is in host memory.
 */
export async function mergedModel(base: CausalLM, dir: string, opts: { name?: string } & AdapterLoadOptions = {}): Promise<CausalLM> {
  const abs = resolve(dir);
  const owned = new Set<tf.Tensor>();
  const layers: LayerWeights[] = base.weights.layers.map((l) => ({ ...l }));
  try {
    await runAsync(readAdapterSteps(abs, loraBase(base), opts, function* (p) {
      const field = MODULES[p.module].field;
      const lin = layers[p.layer][field] as Linear;
      const weight = yield* mergedWeight(lin.weight, p.a, p.b, p.scale);
      owned.add(weight);
      (layers[p.layer] as unknown as Record<string, Linear>)[field] = { weight, bias: lin.bias };
    }));
  } catch (e) {
    tf.dispose([...owned]);
    throw e;
  }
  const weights: DecoderWeights = { ...base.weights, layers };
  const name = opts.name ?? basename(abs);
  const model = new CausalLM(base.config, weights, base.tokenizer, { name, dir: base.dir, backend: base.backend, owned });
  model.merged.push(name);
  // a merged copy samples as its base does (under int8, its merged weights are the ones quantized)
  model.quantization = base.quantization;
  model.kvCacheDtype = base.kvCacheDtype;
  return model;
}
