/**
 * PEFT LoRA adapters: adapter_config.json (r, lora_alpha, target_modules, use_rslora, ...) and
 * adapter_model.safetensors with keys `base_model.model.model.layers.N.<self_attn|mlp>.<proj>.lora_A.weight`
 * (A [r, in], B [out, r]). Adapters attach unmerged (y = xW^T + s·(xA^T)B^T, for training), fold into a
 * merged copy of the weights (for serving), and save back in the same format. A key that names no module
 * of the model is an error, never silently ignored.
 */
import { existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { basename, join, resolve } from "node:path";
import { T2sError } from "../core/errors.js";
import type { DecoderWeights, LayerWeights, Linear, LoraPair } from "./decoder.js";
import { dense } from "./packed.js";
import { CausalLM, type AttachedAdapter } from "./model.js";
import { parseLoraKey, peftLoraKey } from "./lora-layout.js";
import { readSafetensors, writeSafetensors, type FloatTensor } from "./safetensors.js";
import { tf } from "../backend/tf.js";
import { SeededRandom } from "../core/random.js";

const MODULES: Record<string, { group: "self_attn" | "mlp"; field: keyof LayerWeights }> = {
  q_proj: { group: "self_attn", field: "q" },
  k_proj: { group: "self_attn", field: "k" },
  v_proj: { group: "self_attn", field: "v" },
  o_proj: { group: "self_attn", field: "o" },
  gate_proj: { group: "mlp", field: "gate" },
  up_proj: { group: "mlp", field: "up" },
  down_proj: { group: "mlp", field: "down" },
};
/** A decoder layer's module inside the PEFT layout (lora-layout.ts owns the names and layouts). */
const LAYER_MODULE = /^layers\.(\d+)\.(self_attn|mlp)\.([a-z_]+)$/;

export interface AdapterConfig {
  r: number;
  lora_alpha: number;
  target_modules: string[];
  use_rslora?: boolean;
  use_dora?: boolean;
  fan_in_fan_out?: boolean;
  rank_pattern?: Record<string, number>;
  alpha_pattern?: Record<string, number>;
  [key: string]: unknown;
}

interface ParsedPair {
  layer: number;
  module: string;
  a: FloatTensor;
  b: FloatTensor;
  scale: number;
}

/** Returns the PEFT key of one LoRA matrix. */
export function loraKey(layer: number, module: string, which: "A" | "B"): string {
  return peftLoraKey(layer, MODULES[module].group, module, which);
}

function patternValue(pattern: Record<string, number> | undefined, modulePath: string): number | undefined {
  if (!pattern) return undefined;
  for (const [k, v] of Object.entries(pattern)) if (modulePath === k || modulePath.endsWith(`.${k}`) || new RegExp(`^${k}$`).test(modulePath)) return v;
  return undefined;
}

/** Reads an adapter folder and returns its config and LoRA pairs matched to the model's modules. */
export function readAdapter(dir: string, model: CausalLM): { config: AdapterConfig; pairs: ParsedPair[] } {
  const cfgFile = join(dir, "adapter_config.json");
  const wFile = join(dir, "adapter_model.safetensors");
  if (!existsSync(cfgFile)) throw new T2sError("missing_file", `${dir} has no adapter_config.json (is it a PEFT adapter folder?)`);
  if (!existsSync(wFile)) throw new T2sError("missing_file", `${dir} has no adapter_model.safetensors`);
  let config: AdapterConfig;
  try {
    config = JSON.parse(readFileSync(cfgFile, "utf8"));
  } catch (e) {
    throw new T2sError("bad_adapter", `${cfgFile}: not valid JSON (${(e as Error).message})`);
  }
  if (config.peft_type !== undefined && config.peft_type !== "LORA") throw new T2sError("bad_adapter", `${cfgFile}: peft_type ${String(config.peft_type)} is not supported (LORA is)`);
  if (config.use_dora) throw new T2sError("bad_adapter", `${cfgFile}: DoRA adapters (use_dora) are not supported`);
  if (config.fan_in_fan_out) throw new T2sError("bad_adapter", `${cfgFile}: fan_in_fan_out adapters are not supported`);
  if (typeof config.r !== "number" || typeof config.lora_alpha !== "number") throw new T2sError("bad_adapter", `${cfgFile}: needs numeric r and lora_alpha`);
  const tensors = readSafetensors(wFile);
  const halves = new Map<string, { layer: number; module: string; A?: FloatTensor; B?: FloatTensor }>();
  const unmatched: string[] = [];
  const otherLayouts = new Set<string>();
  for (const [key, t] of tensors) {
    const k = parseLoraKey(key);
    const m = k && k.layout === "peft" && (k.part === "lora_A" || k.part === "lora_B") && /^(\.[A-Za-z0-9_-]+)?\.weight$/.test(k.tail) && k.inner ? LAYER_MODULE.exec(k.inner) : null;
    const layer = m ? Number(m[1]) : -1;
    if (!m || !MODULES[m[3]] || MODULES[m[3]].group !== m[2] || layer >= model.config.numLayers) {
      unmatched.push(key);
      if (k?.layout && k.layout !== "peft") otherLayouts.add(k.layout);
      continue;
    }
    const id = `${layer}.${m[3]}`;
    if (!halves.has(id)) halves.set(id, { layer, module: m[3] });
    halves.get(id)![k!.part === "lora_A" ? "A" : "B"] = t;
  }
  if (unmatched.length) {
    const hint = otherLayouts.size ? ` (written in the ${[...otherLayouts].join(", ")} layout: run t2s adapter convert --to peft)` : "";
    throw new T2sError("adapter_mismatch", `${wFile}: ${unmatched.length} key(s) match no module of ${model.name} (${model.config.architecture}, ${model.config.numLayers} layers)${hint}, e.g. ${unmatched.slice(0, 3).join(", ")}`);
  }
  if (halves.size === 0) throw new T2sError("adapter_mismatch", `${wFile}: holds no LoRA weights for any module of ${model.name}`);
  const pairs: ParsedPair[] = [];
  for (const h of halves.values()) {
    const path = `model.layers.${h.layer}.${MODULES[h.module].group}.${h.module}`;
    if (!h.A || !h.B) throw new T2sError("bad_adapter", `${wFile}: ${path} has lora_${h.A ? "A" : "B"} but not its partner`);
    const lin = model.weights.layers[h.layer][MODULES[h.module].field] as Linear;
    const [out, inp] = lin.weight.shape;
    const r = h.A.shape[0];
    if (h.A.shape[1] !== inp || h.B.shape[0] !== out || h.B.shape[1] !== r) {
      throw new T2sError("adapter_mismatch", `${wFile}: ${path} has A [${h.A.shape}] and B [${h.B.shape}] but the model's layer is [${out}, ${inp}] (an adapter for another model?)`);
    }
    const alpha = patternValue(config.alpha_pattern, path) ?? config.lora_alpha;
    const scale = config.use_rslora ? alpha / Math.sqrt(r) : alpha / r;
    pairs.push({ layer: h.layer, module: h.module, a: h.A, b: h.B, scale });
  }
  pairs.sort((x, y) => x.layer - y.layer || x.module.localeCompare(y.module));
  return { config, pairs };
}

function describe(name: string, dir: string | null, config: AdapterConfig, pairs: { layer: number; module: string; scale: number }[]): AttachedAdapter {
  const keys = pairs.flatMap((p) => [loraKey(p.layer, p.module, "A"), loraKey(p.layer, p.module, "B")]);
  return { name, dir, r: config.r, alpha: config.lora_alpha, scale: pairs[0].scale, targetModules: [...new Set(pairs.map((p) => p.module))].sort(), keys, config };
}

/**
 * Attaches a PEFT adapter unmerged under `name` (default: the folder's name) and returns its description;
 * with `trainable`, A and B are tf.Variables the trainer can update. Apply it with the `adapter` option of
 * model.step / model.logits / generate.
 */
export function attachAdapter(model: CausalLM, dir: string, opts: { name?: string; trainable?: boolean } = {}): AttachedAdapter {
  const abs = resolve(dir);
  const name = opts.name ?? basename(abs);
  if (model.adapters.has(name)) throw new T2sError("adapter_exists", `an adapter named ${name} is already attached to ${model.name}`);
  const { config, pairs } = readAdapter(abs, model);
  for (const p of pairs) {
    const lin = model.weights.layers[p.layer][MODULES[p.module].field] as Linear;
    const a = tf.tensor2d(p.a.data, p.a.shape as [number, number]);
    const b = tf.tensor2d(p.b.data, p.b.shape as [number, number]);
    const pair: LoraPair = opts.trainable ? { a: tf.variable(a, true, `${name}/${loraKey(p.layer, p.module, "A")}`) as unknown as tf.Tensor2D, b: tf.variable(b, true, `${name}/${loraKey(p.layer, p.module, "B")}`) as unknown as tf.Tensor2D, scale: p.scale } : { a, b, scale: p.scale };
    if (opts.trainable) tf.dispose([a, b]);
    if (!lin.lora) lin.lora = new Map();
    lin.lora.set(name, pair);
  }
  const info = describe(name, abs, config, pairs);
  model.adapters.set(name, info);
  return info;
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
 * Writes an attached adapter as a PEFT folder (adapter_config.json + adapter_model.safetensors). Async
 * because GPU backends can only read tensors back asynchronously.
 */
export async function saveAdapter(model: CausalLM, name: string, dir: string): Promise<void> {
  const config = peftAdapterConfig(model, name);
  mkdirSync(dir, { recursive: true });
  const tensors = new Map<string, { shape: number[]; data: Float32Array }>();
  for (const { key, tensor } of adapterTensors(model, name)) tensors.set(key, { shape: tensor.shape.slice(), data: (await tensor.data()) as Float32Array });
  writeSafetensors(join(dir, "adapter_model.safetensors"), tensors);
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
 * Returns a new model whose weights have the adapter folded in (W + s·B·A) for serving; the base model is
 * untouched and the two share every tensor the adapter does not change. `name` defaults to the folder name.
 */
export function mergedModel(base: CausalLM, dir: string, opts: { name?: string } = {}): CausalLM {
  const abs = resolve(dir);
  const { pairs } = readAdapter(abs, base);
  const owned = new Set<tf.Tensor>();
  const layers: LayerWeights[] = base.weights.layers.map((l) => ({ ...l }));
  for (const p of pairs) {
    const field = MODULES[p.module].field;
    const lin = layers[p.layer][field] as Linear;
    const weight = tf.tidy(() => tf.add(dense(lin.weight), tf.mul(tf.matMul(tf.tensor2d(p.b.data, p.b.shape as [number, number]), tf.tensor2d(p.a.data, p.a.shape as [number, number])), p.scale))) as tf.Tensor2D;
    owned.add(weight);
    (layers[p.layer] as unknown as Record<string, Linear>)[field] = { weight, bias: lin.bias };
  }
  const weights: DecoderWeights = { ...base.weights, layers };
  const name = opts.name ?? basename(abs);
  const model = new CausalLM(base.config, weights, base.tokenizer, { name, dir: base.dir, backend: base.backend, owned });
  model.merged.push(name);
  // a merged copy samples as its base does (under int8, its merged weights are the ones quantized)
  model.quantization = base.quantization;
  return model;
}
