/**
 * Reading a PEFT adapter folder for a base: the kit's one loading path. attachAdapter and mergedModel
 * (lora.ts) load through it, so do `t2s serve` (at start and at runtime), the tfjs policy, `t2s logits`,
 * `generate` and a training run's init, and `t2s adapter check` runs it against a base folder's
 * config.json, so the check says what the kit will do. In order:
 *  1. adapter_config.json and adapter_model.safetensors are opened as adapter-files.ts opens files (regular
 *     files only; inside the roots when a server confines adapters; sizes capped when limits are given);
 *  2. the config and the safetensors header are parsed, and every key is placed on a module of the base
 *     with shapes that fit (and ranks within the cap), before any tensor data is read;
 *  3. the base the adapter records (base-record.ts) is compared with this base: another base is refused
 *     unless the caller allows it; adapters without a record load on the checks of 2.;
 *  4. the pairs are read one at a time and handed to the caller, with a pause between them.
 */
import { join } from "node:path";
import { T2sError } from "../core/errors.js";
import { expectedShapes, type ModelConfig } from "./config.js";
import { closeFile, openRegularFile, pause, readAt, readWholeFile, realPath, type Io, type OpenedFile } from "./adapter-files.js";
import { baseDifferences, baseMismatchError, baseRecordSteps, readHeaderOf, recordInMetadata, type BaseRecord } from "./base-record.js";
import { parseLoraKey } from "./lora-layout.js";
import { assertFinite, decode, jsonErrorPosition, tensorSpan, type FloatTensor, type SafetensorsHeader, type TensorSpan } from "./safetensors.js";

/** The field of a decoder layer (decoder.ts' LayerWeights) that holds a module's weights. */
export type LayerField = "q" | "k" | "v" | "o" | "gate" | "up" | "down";

/**
 * The modules the kit places LoRA on, with their group in the PEFT path and their field in a decoder layer.
 * (This module imports nothing of decoder.ts: tslab's compiler fails on it when a notebook reaches it.)
 */
export const MODULES: Record<string, { group: "self_attn" | "mlp"; field: LayerField }> = {
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

/** Caps on what an adapter load reads. */
export interface AdapterLimits {
  /** Bytes of adapter_config.json at most. */
  configBytes: number;
  /** Bytes of adapter_model.safetensors at most. */
  weightsBytes: number;
  /** Rank of a LoRA pair at most. */
  rank: number;
}

/**
 * The caps `t2s serve` puts on every adapter it loads (at start and at runtime), each raised by the flag in
 * ADAPTER_LIMIT_FLAGS. Loads from the command line and training read the user's own files and are uncapped.
 */
export const ADAPTER_LIMITS: Readonly<AdapterLimits> = {
  // a PEFT config is a few hundred bytes; long rank/alpha patterns of a large model stay far below 1 MiB
  configBytes: 1024 * 1024,
  // r=128 on every projection of a 7B model is about 1.3 GB in float32
  weightsBytes: 2 * 1024 ** 3,
  // vLLM's --max-lora-rank defaults to 16; the kit trains r 8-64, and PEFT adapters go to 256
  rank: 256,
};
export const ADAPTER_LIMIT_FLAGS: Readonly<Record<keyof AdapterLimits, string>> = { configBytes: "--max-lora-config-bytes", weightsBytes: "--max-lora-bytes", rank: "--max-lora-rank" };

/** How an adapter is loaded: where its files may lie, how large they may be, and whether another base is accepted. */
export interface AdapterLoadOptions {
  /** Folders every file of the adapter must resolve under (none: anywhere). */
  roots?: readonly string[];
  /** Caps (none: uncapped). */
  limits?: AdapterLimits;
  /** Load an adapter whose recorded base differs from this one (default false: refused). */
  allowBaseMismatch?: boolean;
  /** Called after each pair is read and placed, with the pairs done and the total (progress for a long load). */
  onProgress?: (pairsDone: number, pairs: number) => void;
}

/** The base an adapter is read for: its decoder shape, its name for messages, its folder for the record. */
export interface LoraBase {
  name: string;
  config: ModelConfig;
  dir: string | null;
  /** An object the base's record is cached on (the loaded model), so it is read once. */
  cacheKey?: object;
}

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

/** One LoRA pair placed on a module of the base, before its data is read. */
export interface PlannedPair {
  layer: number;
  module: string;
  /** Its module path, e.g. model.layers.0.self_attn.q_proj. */
  path: string;
  a: TensorSpan & { key: string };
  b: TensorSpan & { key: string };
  scale: number;
}

/** A pair with its data, handed to the caller of readAdapterSteps one at a time. */
export interface LoadedPair {
  layer: number;
  module: string;
  a: FloatTensor;
  b: FloatTensor;
  scale: number;
}

/** How the adapter's recorded base compared with this base. */
export type BaseCheck = "same" | "allowed_mismatch" | "no_record" | "no_base_folder";

/** What reading an adapter found: its config, its pairs, its recorded base and how that compared. */
export interface AdapterPlan {
  config: AdapterConfig;
  pairs: PlannedPair[];
  record: BaseRecord | null;
  baseCheck: BaseCheck;
  /** What differs from the recorded base (empty unless baseCheck is allowed_mismatch). */
  baseDiffers: string[];
}

const recordCache = new WeakMap<object, BaseRecord>();

function patternValue(pattern: Record<string, number> | undefined, modulePath: string): number | undefined {
  if (!pattern || typeof pattern !== "object") return undefined;
  for (const [k, v] of Object.entries(pattern)) {
    if (modulePath === k || modulePath.endsWith(`.${k}`)) return v;
    try {
      if (new RegExp(`^${k}$`).test(modulePath)) return v;
    } catch {
      // a key that is not a regular expression matches by name only
    }
  }
  return undefined;
}

/** Parses adapter_config.json's bytes; errors name the file and a byte position, never its content. */
export function parseAdapterConfig(bytes: Buffer, cfgFile: string): AdapterConfig {
  let config: unknown;
  try {
    config = JSON.parse(bytes.toString("utf8"));
  } catch (e) {
    throw new T2sError("bad_adapter", `${cfgFile}: not valid JSON${jsonErrorPosition(e)}`);
  }
  if (config === null || typeof config !== "object" || Array.isArray(config)) throw new T2sError("bad_adapter", `${cfgFile}: not a JSON object`);
  const c = config as AdapterConfig;
  if (c.peft_type !== undefined && c.peft_type !== "LORA") throw new T2sError("bad_adapter", `${cfgFile}: peft_type ${String(c.peft_type).slice(0, 32)} is not supported (LORA is)`);
  if (c.use_dora) throw new T2sError("bad_adapter", `${cfgFile}: DoRA adapters (use_dora) are not supported`);
  if (c.fan_in_fan_out) throw new T2sError("bad_adapter", `${cfgFile}: fan_in_fan_out adapters are not supported`);
  if (typeof c.r !== "number" || typeof c.lora_alpha !== "number") throw new T2sError("bad_adapter", `${cfgFile}: needs numeric r and lora_alpha`);
  return c;
}

/**
 * Places every weight of the header on a module of the base (checking names, partners, shapes and ranks);
 * throws T2sError adapter_mismatch for a key or shape that does not fit, bad_adapter / bad_safetensors for
 * a malformed file, rank_too_large past the cap. Reads no tensor data.
 */
export function planPairs(config: AdapterConfig, header: SafetensorsHeader, base: LoraBase, wFile: string, limits?: AdapterLimits): PlannedPair[] {
  const c = base.config;
  const halves = new Map<string, { layer: number; module: string; A?: TensorSpan & { key: string }; B?: TensorSpan & { key: string } }>();
  const unmatched: string[] = [];
  const otherLayouts = new Set<string>();
  for (const key of Object.keys(header.entries)) {
    const k = parseLoraKey(key);
    const m = k && k.layout === "peft" && (k.part === "lora_A" || k.part === "lora_B") && /^(\.[A-Za-z0-9_-]+)?\.weight$/.test(k.tail) && k.inner ? LAYER_MODULE.exec(k.inner) : null;
    const layer = m ? Number(m[1]) : -1;
    if (!m || !MODULES[m[3]] || MODULES[m[3]].group !== m[2] || layer >= c.numLayers) {
      unmatched.push(key);
      if (k?.layout && k.layout !== "peft") otherLayouts.add(k.layout);
      continue;
    }
    const id = `${layer}.${m[3]}`;
    if (!halves.has(id)) halves.set(id, { layer, module: m[3] });
    halves.get(id)![k!.part === "lora_A" ? "A" : "B"] = { key, ...tensorSpan(header.entries[key], key, wFile, header.dataLen) };
  }
  if (unmatched.length) {
    const hint = otherLayouts.size ? ` (written in the ${[...otherLayouts].join(", ")} layout: run t2s adapter convert --to peft)` : "";
    throw new T2sError("adapter_mismatch", `${wFile}: ${unmatched.length} key(s) match no module of ${base.name} (${c.architecture}, ${c.numLayers} layers)${hint}, e.g. ${unmatched.slice(0, 3).join(", ")}`);
  }
  if (halves.size === 0) throw new T2sError("adapter_mismatch", `${wFile}: holds no LoRA weights for any module of ${base.name}`);
  const shapes = expectedShapes(c);
  const pairs: PlannedPair[] = [];
  for (const h of halves.values()) {
    const path = `model.layers.${h.layer}.${MODULES[h.module].group}.${h.module}`;
    if (!h.A || !h.B) throw new T2sError("bad_adapter", `${wFile}: ${path} has lora_${h.A ? "A" : "B"} but not its partner`);
    const [out, inp] = shapes.get(`${path}.weight`)!;
    const r = h.A.shape[0];
    if (h.A.shape.length !== 2 || h.B.shape.length !== 2 || h.A.shape[1] !== inp || h.B.shape[0] !== out || h.B.shape[1] !== r) {
      throw new T2sError("adapter_mismatch", `${wFile}: ${path} has A [${h.A.shape}] and B [${h.B.shape}] but the model's layer is [${out}, ${inp}] (an adapter for another model?)`);
    }
    if (limits && r > limits.rank) throw new T2sError("rank_too_large", `${wFile}: ${path} has rank ${r}, over the limit of ${limits.rank} (${ADAPTER_LIMIT_FLAGS.rank} raises it)`);
    const alpha = patternValue(config.alpha_pattern, path) ?? config.lora_alpha;
    const scale = config.use_rslora ? alpha / Math.sqrt(r) : alpha / r;
    pairs.push({ layer: h.layer, module: h.module, path, a: h.A, b: h.B, scale });
  }
  pairs.sort((x, y) => x.layer - y.layer || x.module.localeCompare(y.module));
  return pairs;
}

/** The real paths of the roots that exist (a root that does not resolve confines to nothing). */
function* realRoots(roots: readonly string[]): Io<string[]> {
  const out: string[] = [];
  for (const r of roots) {
    try {
      out.push(yield* realPath(r));
    } catch {
      // skipped: no file lies under a folder that does not exist
    }
  }
  return out;
}

/** The record of a base (cached on its cacheKey), or null when the base has no folder to read. */
export function* recordOfBase(base: LoraBase): Io<BaseRecord | null> {
  if (!base.dir) return null;
  const cached = base.cacheKey ? recordCache.get(base.cacheKey) : undefined;
  if (cached) return cached;
  const r = yield* baseRecordSteps(base.dir);
  if (base.cacheKey) recordCache.set(base.cacheKey, r);
  return r;
}

/**
 * Bytes of a tensor read, widened and checked between two turns of the event loop at most (4 MiB: a few
 * milliseconds of copying), so a large tensor never holds the loop for long.
 */
const READ_PIECE_BYTES = 4 * 1024 * 1024;

/** One tensor of an opened adapter file, widened to float32 piece by piece (non-finite values refused). */
function* readTensor(w: OpenedFile, header: SafetensorsHeader, t: TensorSpan & { key: string }): Io<FloatTensor> {
  const bytesPer = t.count ? (t.end - t.begin) / t.count : 4;
  const perPiece = Math.max(1, Math.floor(READ_PIECE_BYTES / bytesPer));
  const data = new Float32Array(t.count);
  for (let at = 0; at < t.count; at += perPiece) {
    const n = Math.min(perPiece, t.count - at);
    const bytes = yield* readAt(w, header.dataStart + t.begin + at * bytesPer, n * bytesPer);
    if (bytes.length < n * bytesPer) throw new T2sError("bad_safetensors", `${w.shown}: tensor ${t.key}: the file ended while reading it (truncated?)`);
    const piece = decode(bytes, 0, n, t.dtype, data.subarray(at, at + n));
    try {
      assertFinite(piece, t.key, w.shown);
    } catch {
      assertFinite(data.subarray(0, at + n), t.key, w.shown); // the message counts from the tensor's start
    }
    if (at + n < t.count) yield* pause();
  }
  return { shape: t.shape, data, dtype: t.dtype };
}

/**
 * The steps that read adapter folder `dir` for `base` (see the module comment); `visit` gets each pair's
 * data in turn, and may return steps of its own (none: nothing but the header is read, as `t2s adapter
 * check` needs). Run them with runSync or runAsync (adapter-files.ts).
 */
export function* readAdapterSteps(dir: string, base: LoraBase, opts: AdapterLoadOptions = {}, visit?: (pair: LoadedPair) => Io<void> | void): Io<AdapterPlan> {
  const roots = opts.roots?.length ? yield* realRoots(opts.roots) : undefined;
  if (opts.roots?.length && !roots!.length) throw new T2sError("outside_roots", `none of the server's adapter folders (--lora-root) exists`);
  const limits = opts.limits;
  const cfgFile = join(dir, "adapter_config.json");
  const wFile = join(dir, "adapter_model.safetensors");
  let cfgBytes: Buffer;
  try {
    cfgBytes = yield* readWholeFile(cfgFile, cfgFile, { roots, maxBytes: limits?.configBytes, limitName: ADAPTER_LIMIT_FLAGS.configBytes });
  } catch (e) {
    if (e instanceof T2sError && e.code === "missing_file") throw new T2sError("missing_file", `${dir} has no adapter_config.json (is it a PEFT adapter folder?)`);
    throw e;
  }
  const config = parseAdapterConfig(cfgBytes, cfgFile);
  let w: OpenedFile;
  try {
    w = yield* openRegularFile(wFile, wFile, { roots, maxBytes: limits?.weightsBytes, limitName: ADAPTER_LIMIT_FLAGS.weightsBytes });
  } catch (e) {
    if (e instanceof T2sError && e.code === "missing_file") throw new T2sError("missing_file", `${dir} has no adapter_model.safetensors`);
    throw e;
  }
  try {
    const header = yield* readHeaderOf(w);
    const pairs = planPairs(config, header, base, wFile, limits);
    const record = recordInMetadata(header.metadata);
    let baseCheck: BaseCheck = record ? "same" : "no_record";
    let baseDiffers: string[] = [];
    if (record) {
      const actual = yield* recordOfBase(base);
      if (!actual) baseCheck = "no_base_folder";
      else {
        baseDiffers = baseDifferences(record, actual);
        if (baseDiffers.length && !opts.allowBaseMismatch) throw baseMismatchError(wFile, record, actual, baseDiffers);
        if (baseDiffers.length) baseCheck = "allowed_mismatch";
      }
    }
    if (visit) {
      for (const [i, p] of pairs.entries()) {
        const a = yield* readTensor(w, header, p.a);
        const b = yield* readTensor(w, header, p.b);
        const work = visit({ layer: p.layer, module: p.module, a, b, scale: p.scale });
        if (work) yield* work;
        opts.onProgress?.(i + 1, pairs.length);
        yield* pause();
      }
    }
    return { config, pairs, record, baseCheck, baseDiffers };
  } finally {
    yield* closeFile(w);
  }
}
