/**
 * The `t2s train sft|grpo --config FILE` schema: parsing and validation with errors that name the field.
 * Relative paths are resolved against the config file's folder. Unknown keys are errors (a typo would
 * otherwise silently train with a default). The fields, their types and defaults are settings.ts's table
 * (docs/training.md's table is checked against it).
 */
import type { QuantizationName } from "../model/quantization.js";
import type { KvCacheDtypeName } from "../model/kv-cache-dtype.js";
import { existsSync, readFileSync } from "node:fs";
import { dirname, isAbsolute, relative, resolve } from "node:path";
import { T2sError } from "../core/errors.js";
import type { LossType } from "./losses.js";
import type { ImportanceSamplingMode } from "./rollout-correction.js";
import type { AdvantageScale } from "./advantages.js";
import type { ScheduleKind } from "./schedule.js";
import type { Sampling } from "../policy/types.js";
import { IGNORED_KEYS, SETTINGS, defaultOf, settingOf, type Setting, type SettingValue, type TrainMode } from "./settings.js";

export type { TrainMode };

export interface AdapterSettings {
  r: number;
  alpha: number;
  targets: string[];
  use_rslora: boolean;
  /** Start from an existing PEFT adapter folder instead of a fresh one. */
  init: string | null;
  /** Accept an init adapter (or a checkpoint to resume) recorded for another base. */
  allow_base_mismatch: boolean;
}

export interface TrainConfig {
  mode: TrainMode;
  model: string;
  backend: string | null;
  /** LoRA settings; null with full_weights = train every weight. */
  adapter: AdapterSettings | null;
  full_weights: boolean;
  tasks: string;
  split: "train" | "holdout" | "all";
  band: { rows: string; lo: number; hi: number } | null;
  limit: number | null;
  steps: number;
  seed: number;
  output_dir: string;
  checkpoint_every: number;
  keep_checkpoints: number;
  lr: number;
  schedule: ScheduleKind;
  warmup_steps: number;
  min_lr_ratio: number;
  weight_decay: number;
  max_grad_norm: number;
  max_tensor_elements: number;
  micro_batch_rows: number;
  logit_chunk_tokens: number;
  weights_dtype: "auto" | "fp32" | "bf16";
  gradient_checkpointing: "auto" | "on" | "off";
  // grpo
  prompts_per_step: number;
  group_size: number;
  loss_type: LossType;
  epsilon_low: number;
  epsilon_high: number;
  beta: number;
  scale_rewards: AdvantageScale;
  mu: number;
  mask_truncated: boolean;
  reward_preset: "shaped" | "binary" | "tool-rl";
  sampling: Required<Pick<Sampling, "temperature" | "top_p" | "max_tokens">> & { max_batch: number; quantization: QuantizationName; kv_cache_dtype: KvCacheDtypeName; prefix_caching: boolean };
  vllm_importance_sampling_correction: boolean;
  vllm_importance_sampling_mode: ImportanceSamplingMode;
  vllm_importance_sampling_cap: number;
  episode: { style: "single" | "tool"; protocol: "native" | "hermes"; max_tool_calls: number; min_tool_calls: number; max_context_tokens: number; tool_rows: number };
  eval: { every: number; split: "train" | "holdout"; limit: number; samples: number } | null;
  // sft
  /** A conversations file (JSONL of {messages, tools?}) to train on instead of the tasks' gold replies. */
  conversations: string | null;
  batch_size: number;
  epochs: number;
}

// every TrainConfig field is a setting of the table, and every setting a TrainConfig field
type SettingName = (typeof SETTINGS)[number]["name"];
const fieldsMatchSettings: [SettingName] extends [keyof TrainConfig] ? ([keyof TrainConfig] extends [SettingName] ? true : never) : never = true;
void fieldsMatchSettings;

/** The modes each top-level key applies to. */
const KEYS: Record<string, readonly TrainMode[]> = Object.fromEntries([
  ...(SETTINGS as readonly Setting[]).map((x) => [x.name, x.modes ?? ["sft", "grpo"]] as const),
  ...IGNORED_KEYS.map((k) => [k, ["sft", "grpo"]] as const),
]);

class Fields {
  constructor(private readonly src: string) {}
  fail(field: string, want: string, got: unknown): never {
    throw new T2sError("bad_config", `${this.src}: field '${field}' ${want}, got ${JSON.stringify(got)}`);
  }
  num(o: Record<string, unknown>, field: string, def: number | undefined, check: { min?: number; max?: number; int?: boolean; gt?: number } = {}, path = field): number {
    const v = o[field];
    if (v === undefined || v === null) {
      if (def === undefined) this.fail(path, "is required", v);
      return def;
    }
    const bounds = [check.int ? "an integer" : "a number", check.gt !== undefined ? `> ${check.gt}` : "", check.min !== undefined ? `>= ${check.min}` : "", check.max !== undefined ? `<= ${check.max}` : ""].filter(Boolean).join(" ");
    if (typeof v !== "number" || !Number.isFinite(v) || (check.int && !Number.isInteger(v)) || (check.min !== undefined && v < check.min) || (check.max !== undefined && v > check.max) || (check.gt !== undefined && v <= check.gt)) {
      this.fail(path, `must be ${bounds}`, v);
    }
    return v;
  }
  str(o: Record<string, unknown>, field: string, def: string | undefined, path = field): string {
    const v = o[field];
    if (v === undefined || v === null) {
      if (def === undefined) this.fail(path, "is required", v);
      return def;
    }
    if (typeof v !== "string" || v === "") this.fail(path, "must be a non-empty string", v);
    return v;
  }
  oneOf<T extends string>(o: Record<string, unknown>, field: string, options: readonly T[], def: T, path = field): T {
    const v = o[field] ?? def;
    if (!options.includes(v as T)) this.fail(path, `must be one of ${options.map((x) => `"${x}"`).join(", ")}`, v);
    return v as T;
  }
  bool(o: Record<string, unknown>, field: string, def: boolean, path = field): boolean {
    const v = o[field] ?? def;
    if (typeof v !== "boolean") this.fail(path, "must be true or false", v);
    return v;
  }
  obj(o: Record<string, unknown>, field: string, allowed: string[], path = field): Record<string, unknown> | null {
    const v = o[field];
    if (v === undefined || v === null) return null;
    if (typeof v !== "object" || Array.isArray(v)) this.fail(path, "must be an object", v);
    for (const k of Object.keys(v as object)) if (!allowed.includes(k)) this.fail(`${path}.${k}`, `is not a known field (known: ${allowed.join(", ")})`, (v as Record<string, unknown>)[k]);
    return v as Record<string, unknown>;
  }
}

/** Reads one scalar or list setting of `obj` (`seen`: the fields of the same object read before it). */
function readSetting(f: Fields, obj: Record<string, unknown>, s: Setting, mode: TrainMode, seen: Record<string, unknown>, name: string, path: (p: string) => string): unknown {
  const def = defaultOf(name, mode, seen, obj);
  const field = s.name;
  const t = s.type;
  const absent = obj[field] === undefined || obj[field] === null;
  if (absent && def === null) return null;
  // null stands for "off" only where the default is off; elsewhere it is a mistake, not a request for the default
  if (obj[field] === null) f.fail(name, "is null; give a value, or leave the field out for its default", null);
  switch (t.kind) {
    case "int":
    case "number":
      return f.num(obj, field, def as number | undefined, { int: t.kind === "int", min: t.min, max: t.max, gt: t.gt }, name);
    case "string":
      return f.str(obj, field, def as string | undefined, name);
    case "path":
      // a default is no path to resolve ("" for the tasks of a conversations run)
      return absent ? f.str(obj, field, def as string | undefined, name) : path(f.str(obj, field, undefined, name));
    case "bool":
      return f.bool(obj, field, def as boolean, name);
    case "enum":
      return f.oneOf(obj, field, t.options, def as string, name);
    case "list": {
      const v = (obj[field] ?? def) as SettingValue;
      if (!Array.isArray(v) || v.length === 0 || v.some((x) => !t.options.includes(x as string))) f.fail(name, `must be a non-empty list of ${t.options.join(", ")}`, v);
      return [...(v as string[])];
    }
    case "object":
      throw new Error(`${name} is an object setting`);
  }
}

/** Validates a parsed config object for `mode`; `file` names it in errors and anchors relative paths. */
export function validateConfig(raw: unknown, mode: TrainMode, file = "config"): TrainConfig {
  const f = new Fields(file);
  if (!raw || typeof raw !== "object" || Array.isArray(raw)) throw new T2sError("bad_config", `${file}: must hold one JSON object`);
  const o = raw as Record<string, unknown>;
  for (const k of Object.keys(o)) {
    if (!(k in KEYS)) f.fail(k, "is not a known field (see docs/training.md)", o[k]);
    if (!KEYS[k].includes(mode)) f.fail(k, `applies to '${KEYS[k].join("/")}' training, not '${mode}'`, o[k]);
  }
  if (o.mode !== undefined && o.mode !== mode) f.fail("mode", `says this file is for '${String(o.mode)}' training, but 't2s train ${mode}' was run`, o.mode);
  const base = dirname(resolve(file));
  const path = (p: string) => (isAbsolute(p) ? p : resolve(base, p));

  const read = (obj: Record<string, unknown>, name: string, seen: Record<string, unknown> = obj, prefix = ""): unknown =>
    readSetting(f, obj, settingOf(prefix + name), mode, seen, prefix + name, path);
  const object = (name: string): Record<string, unknown> | null => {
    const st = settingOf(name).type;
    if (st.kind !== "object") throw new Error(`${name} is no object setting`);
    const v = f.obj(o, name, st.fields.map((x) => x.name));
    if (v === null && st.absent === "null") return null;
    const src = v ?? {};
    const out: Record<string, unknown> = {};
    for (const x of st.fields) out[x.name] = read(src, x.name, out, `${name}.`);
    return out;
  };

  const full = read(o, "full_weights") as boolean;
  if (full && o.adapter !== undefined && o.adapter !== null) f.fail("adapter", "must be absent when full_weights is true (train either an adapter or all weights)", o.adapter);
  const adapter = full ? null : (object("adapter") as unknown as AdapterSettings);
  const band = object("band") as TrainConfig["band"];
  if (band && band.lo > band.hi) f.fail("band.lo", `must not exceed band.hi (${band.hi})`, band.lo);
  const done: Record<string, unknown> = { adapter, full_weights: full, band };
  const top: Record<string, unknown> = {};
  for (const x of SETTINGS as readonly Setting[]) {
    top[x.name] = x.name in done ? done[x.name] : x.type.kind === "object" ? object(x.name) : read(o, x.name, top);
  }
  const cfg = top as unknown as TrainConfig;
  if (mode === "grpo" && cfg.steps < 1) f.fail("steps", "must be an integer >= 1", cfg.steps);
  if (cfg.loss_type === "cispo" && cfg.epsilon_high < 1) f.fail("epsilon_high", "is the absolute cap on the importance weight for cispo (TRL convention) and must be >= 1", cfg.epsilon_high);
  if (cfg.beta > 0 && cfg.full_weights) f.fail("beta", "needs a reference policy; with full_weights there is none (train an adapter, or set beta 0)", cfg.beta);
  if (cfg.warmup_steps > Math.max(cfg.steps, 1) && mode === "grpo") f.fail("warmup_steps", `must not exceed steps (${cfg.steps})`, cfg.warmup_steps);
  // a rule no episode can meet would zero every reward and leave GRPO nothing to learn from
  const ep = cfg.episode;
  if (ep.min_tool_calls > 0 && ep.style !== "tool") f.fail("episode.min_tool_calls", 'needs episode.style "tool" (single-style episodes make no tool calls)', ep.min_tool_calls);
  if (ep.min_tool_calls > ep.max_tool_calls) f.fail("episode.min_tool_calls", `must not exceed episode.max_tool_calls (${ep.max_tool_calls})`, ep.min_tool_calls);
  return cfg;
}

/** Reads and validates a config file. */
export function readConfig(file: string, mode: TrainMode): TrainConfig {
  if (!existsSync(file)) throw new T2sError("not_found", `config file ${file} does not exist`);
  let raw: unknown;
  try {
    raw = JSON.parse(readFileSync(file, "utf8"));
  } catch (e) {
    throw new T2sError("bad_config", `${file}: not valid JSON (${(e as Error).message})`);
  }
  return validateConfig(raw, mode, file);
}

/**
 * Fields that may change between a run and its resume without changing what the steps already taken
 * mean: where it runs (backend, output_dir) and how often it checkpoints. `steps` (and SFT's `epochs`) may grow too, unless a
 * cosine schedule ties the learning rate of every step to the total.
 */
// how the same math is laid out in memory or where it is kept: a resumed run may change them freely
// (prefix caching reuses keys and values the sampler would compute again; logit_chunk_tokens lays out the same
// math in memory)
const RESUME_NEUTRAL = new Set(["backend", "checkpoint_every", "keep_checkpoints", "output_dir", "gradient_checkpointing", "sampling.prefix_caching", "logit_chunk_tokens"]);

function flatten(value: unknown, prefix: string, out: Map<string, string>): void {
  if (value !== null && typeof value === "object" && !Array.isArray(value)) {
    for (const [k, v] of Object.entries(value as Record<string, unknown>)) flatten(v, prefix ? `${prefix}.${k}` : k, out);
    if (Object.keys(value as object).length === 0) out.set(prefix, "{}");
    return;
  }
  out.set(prefix, JSON.stringify(value ?? null));
}

/**
 * The fields on which a resumed run's config differs from the one its checkpoints were trained with, as
 * "field: old -> new" strings (nested fields dotted: "sampling.temperature"); empty when the resume
 * continues the same run.
 */
export function configChanges(before: Record<string, unknown>, now: TrainConfig): string[] {
  const a = new Map<string, string>();
  const b = new Map<string, string>();
  flatten(before, "", a);
  flatten(now, "", b);
  const neutral = (field: string) => RESUME_NEUTRAL.has(field) || RESUME_NEUTRAL.has(field.split(".")[0]) || ((field === "steps" || field === "epochs") && now.schedule !== "cosine" && before.schedule !== "cosine");
  // a setting the kit gained after the run started is absent from its config.json: at its default, no change
  const addedAtDefault = (field: string) => {
    if (a.has(field)) return false;
    const [top, sub] = field.split(".");
    const now_ = now as unknown as Record<string, unknown>;
    const seen = (sub === undefined ? now_ : now_[top]) as Record<string, unknown> | null;
    try {
      return JSON.stringify(defaultOf(field, now.mode, seen ?? {}) ?? null) === b.get(field);
    } catch {
      return false; // not a setting of the table
    }
  };
  const fields = [...new Set([...a.keys(), ...b.keys()])].filter((f) => !neutral(f) && !addedAtDefault(f)).sort();
  const samePlace = movedWithRun(before, now);
  return fields
    .filter((f) => (a.get(f) ?? "null") !== (b.get(f) ?? "null") && !samePlace(f, a.get(f), b.get(f)))
    .map((f) => `${f}: ${a.get(f) ?? "(absent)"} -> ${b.get(f) ?? "(absent)"}`);
}

/**
 * Whether a path setting changed only because the run's folder moved: the same path relative to
 * output_dir before and after (a project folder copied or renamed with its model, tasks and run inside).
 */
function movedWithRun(before: Record<string, unknown>, now: TrainConfig): (field: string, a: string | undefined, b: string | undefined) => boolean {
  const oldDir = typeof before.output_dir === "string" ? before.output_dir : null;
  return (field, a, b) => {
    let isPath = false;
    try {
      isPath = settingOf(field).type.kind === "path";
    } catch {
      return false; // not a setting of the table
    }
    if (!isPath || oldDir === null || a === undefined || b === undefined) return false;
    const pa = JSON.parse(a) as unknown;
    const pb = JSON.parse(b) as unknown;
    return typeof pa === "string" && typeof pb === "string" && pa !== "" && relative(oldDir, pa) === relative(now.output_dir, pb);
  };
}
