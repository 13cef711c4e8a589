/**
 * The `t2s train sft|grpo --config FILE` schema: parsing and validation with errors that name the field.
 * Relative paths are resolved against the config file's folder. Unknown keys are errors (a typo would
 * otherwise silently train with a default). docs/training.md documents every field.
 */
import { existsSync, readFileSync } from "node:fs";
import { dirname, isAbsolute, resolve } from "node:path";
import { T2sError } from "../core/errors.js";
import { LOSS_TYPES, type LossType } from "./losses.js";
import type { AdvantageScale } from "./advantages.js";
import type { ScheduleKind } from "./schedule.js";

export type TrainMode = "sft" | "grpo";

export interface AdapterSettings {
  r: number;
  alpha: number;
  targets: string[];
  use_rslora: boolean;
  /** Start from an existing PEFT adapter folder instead of a fresh one. */
  init: string | null;
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
  sampling: { temperature: number; top_p: number; max_tokens: number; max_batch: number };
  episode: { style: "single" | "tool"; protocol: "native" | "hermes"; max_tool_calls: number; max_context_tokens: number };
  eval: { every: number; split: "train" | "holdout"; limit: number; samples: number } | null;
  // sft
  /** A conversations file (JSONL of {messages, tools?}) to train on instead of the tasks' gold replies. */
  conversations: string | null;
  batch_size: number;
  epochs: number;
}

const KEYS: Record<string, TrainMode[]> = {
  mode: ["sft", "grpo"], model: ["sft", "grpo"], backend: ["sft", "grpo"], adapter: ["sft", "grpo"], full_weights: ["sft", "grpo"],
  tasks: ["sft", "grpo"], split: ["sft", "grpo"], band: ["sft", "grpo"], limit: ["sft", "grpo"], steps: ["sft", "grpo"], seed: ["sft", "grpo"],
  output_dir: ["sft", "grpo"], checkpoint_every: ["sft", "grpo"], keep_checkpoints: ["sft", "grpo"], lr: ["sft", "grpo"], schedule: ["sft", "grpo"], warmup_steps: ["sft", "grpo"],
  min_lr_ratio: ["sft", "grpo"], weight_decay: ["sft", "grpo"], max_grad_norm: ["sft", "grpo"], max_tensor_elements: ["sft", "grpo"],
  micro_batch_rows: ["sft", "grpo"], episode: ["sft", "grpo"], $schema: ["sft", "grpo"], comment: ["sft", "grpo"],
  prompts_per_step: ["grpo"], group_size: ["grpo"], loss_type: ["grpo"], epsilon_low: ["grpo"], epsilon_high: ["grpo"], beta: ["grpo"],
  scale_rewards: ["grpo"], mu: ["grpo"], mask_truncated: ["grpo"], reward_preset: ["grpo"], sampling: ["grpo"], eval: ["grpo"],
  batch_size: ["sft"], epochs: ["sft"], conversations: ["sft"],
};

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

  const full = f.bool(o, "full_weights", false);
  const a = f.obj(o, "adapter", ["r", "alpha", "targets", "use_rslora", "init"]);
  if (full && a) f.fail("adapter", "must be absent when full_weights is true (train either an adapter or all weights)", o.adapter);
  let adapter: AdapterSettings | null = null;
  if (!full) {
    const aa = a ?? {};
    const targets = aa.targets ?? ["q_proj", "v_proj"];
    const known = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"];
    if (!Array.isArray(targets) || targets.length === 0 || targets.some((t) => !known.includes(t as string))) f.fail("adapter.targets", `must be a non-empty list of ${known.join(", ")}`, targets);
    const r = f.num(aa, "r", 8, { int: true, min: 1 }, "adapter.r");
    adapter = {
      r,
      alpha: f.num(aa, "alpha", r, { gt: 0 }, "adapter.alpha"),
      targets: targets as string[],
      use_rslora: f.bool(aa, "use_rslora", false, "adapter.use_rslora"),
      init: aa.init === undefined || aa.init === null ? null : path(f.str(aa, "init", undefined, "adapter.init")),
    };
  }
  const band = f.obj(o, "band", ["rows", "lo", "hi"]);
  let bandCfg: TrainConfig["band"] = null;
  if (band) {
    const lo = f.num(band, "lo", 0.1, { min: 0, max: 1 }, "band.lo");
    const hi = f.num(band, "hi", 0.9, { min: 0, max: 1 }, "band.hi");
    if (lo > hi) f.fail("band.lo", `must not exceed band.hi (${hi})`, lo);
    bandCfg = { rows: path(f.str(band, "rows", undefined, "band.rows")), lo, hi };
  }
  const s = f.obj(o, "sampling", ["temperature", "top_p", "max_tokens", "max_batch"]) ?? {};
  const e = f.obj(o, "episode", ["style", "protocol", "max_tool_calls", "max_context_tokens"]) ?? {};
  const ev = f.obj(o, "eval", ["every", "split", "limit", "samples"]);
  const lossType = f.oneOf(o, "loss_type", LOSS_TYPES, "dapo");
  const cfg: TrainConfig = {
    mode,
    model: path(f.str(o, "model", undefined)),
    backend: o.backend === undefined ? null : f.str(o, "backend", undefined),
    adapter,
    full_weights: full,
    // SFT on a conversations file needs no tasks
    tasks: o.conversations !== undefined && o.tasks === undefined ? "" : path(f.str(o, "tasks", undefined)),
    split: f.oneOf(o, "split", ["train", "holdout", "all"] as const, "train"),
    band: bandCfg,
    limit: o.limit === undefined ? null : f.num(o, "limit", undefined, { int: true, min: 1 }),
    steps: f.num(o, "steps", mode === "grpo" ? undefined : 0, { int: true, min: mode === "grpo" ? 1 : 0 }),
    seed: f.num(o, "seed", 0, { int: true, min: 0 }),
    output_dir: path(f.str(o, "output_dir", undefined)),
    checkpoint_every: f.num(o, "checkpoint_every", 0, { int: true, min: 0 }),
    keep_checkpoints: f.num(o, "keep_checkpoints", 0, { int: true, min: 0 }),
    lr: f.num(o, "lr", mode === "grpo" ? 1e-6 : 1e-5, { gt: 0 }),
    schedule: f.oneOf(o, "schedule", ["cosine", "constant"] as const, "constant"),
    warmup_steps: f.num(o, "warmup_steps", 0, { int: true, min: 0 }),
    min_lr_ratio: f.num(o, "min_lr_ratio", 0, { min: 0, max: 1 }),
    weight_decay: f.num(o, "weight_decay", 0, { min: 0 }),
    max_grad_norm: f.num(o, "max_grad_norm", 1, { min: 0 }),
    max_tensor_elements: f.num(o, "max_tensor_elements", 2 ** 28, { int: true, min: 1 }),
    micro_batch_rows: f.num(o, "micro_batch_rows", 0, { int: true, min: 0 }),
    prompts_per_step: f.num(o, "prompts_per_step", 8, { int: true, min: 1 }),
    group_size: f.num(o, "group_size", 8, { int: true, min: 2 }),
    loss_type: lossType,
    epsilon_low: f.num(o, "epsilon_low", 0.2, { min: 0, max: 1 }),
    epsilon_high: f.num(o, "epsilon_high", lossType === "cispo" ? 5 : 0.28, { gt: 0 }),
    beta: f.num(o, "beta", 0, { min: 0 }),
    scale_rewards: f.oneOf(o, "scale_rewards", ["group", "batch", "none"] as const, "group"),
    mu: f.num(o, "mu", 1, { int: true, min: 1 }),
    mask_truncated: f.bool(o, "mask_truncated", false),
    reward_preset: f.oneOf(o, "reward_preset", ["shaped", "binary", "tool-rl"] as const, "shaped"),
    sampling: {
      temperature: f.num(s, "temperature", 1, { gt: 0 }, "sampling.temperature"),
      top_p: f.num(s, "top_p", 1, { gt: 0, max: 1 }, "sampling.top_p"),
      max_tokens: f.num(s, "max_tokens", 512, { int: true, min: 1 }, "sampling.max_tokens"),
      max_batch: f.num(s, "max_batch", 64, { int: true, min: 1 }, "sampling.max_batch"),
    },
    episode: {
      style: f.oneOf(e, "style", ["single", "tool"] as const, "single", "episode.style"),
      protocol: f.oneOf(e, "protocol", ["native", "hermes"] as const, "native", "episode.protocol"),
      max_tool_calls: f.num(e, "max_tool_calls", 5, { int: true, min: 0 }, "episode.max_tool_calls"),
      max_context_tokens: f.num(e, "max_context_tokens", 4096, { int: true, min: 16 }, "episode.max_context_tokens"),
    },
    eval: ev
      ? {
          every: f.num(ev, "every", undefined, { int: true, min: 1 }, "eval.every"),
          split: f.oneOf(ev, "split", ["train", "holdout"] as const, "holdout", "eval.split"),
          limit: f.num(ev, "limit", 50, { int: true, min: 1 }, "eval.limit"),
          samples: f.num(ev, "samples", 1, { int: true, min: 1 }, "eval.samples"),
        }
      : null,
    conversations: o.conversations === undefined || o.conversations === null ? null : path(f.str(o, "conversations", undefined)),
    batch_size: f.num(o, "batch_size", 8, { int: true, min: 1 }),
    epochs: f.num(o, "epochs", 1, { int: true, min: 1 }),
  };
  if (cfg.loss_type === "cispo" && cfg.epsilon_high < 1) f.fail("epsilon_high", "is the absolute cap on the importance weight for cispo (TRL convention) and must be >= 1", cfg.epsilon_high);
  if (cfg.beta > 0 && cfg.full_weights) f.fail("beta", "needs a reference policy; with full_weights there is none (train an adapter, or set beta 0)", cfg.beta);
  if (cfg.warmup_steps > Math.max(cfg.steps, 1) && mode === "grpo") f.fail("warmup_steps", `must not exceed steps (${cfg.steps})`, cfg.warmup_steps);
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
 * mean: where it runs and how often it checkpoints. `steps` (and SFT's `epochs`) may grow too, unless a
 * cosine schedule ties the learning rate of every step to the total.
 */
const RESUME_NEUTRAL = new Set(["backend", "checkpoint_every", "keep_checkpoints"]);

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
  const neutral = (field: string) => RESUME_NEUTRAL.has(field.split(".")[0]) || ((field === "steps" || field === "epochs") && now.schedule !== "cosine" && before.schedule !== "cosine");
  const fields = [...new Set([...a.keys(), ...b.keys()])].filter((f) => !neutral(f)).sort();
  return fields.filter((f) => (a.get(f) ?? "null") !== (b.get(f) ?? "null")).map((f) => `${f}: ${a.get(f) ?? "(absent)"} -> ${b.get(f) ?? "(absent)"}`);
}
