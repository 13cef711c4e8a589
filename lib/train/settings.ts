/**
 * The training settings table: every field of a `t2s train sft|grpo` config file with the modes it applies
 * to, its type, its default and what it means. config.ts validates and fills in defaults from it, the
 * allowed keys come from it, TrainConfig's fields are checked against it when the kit compiles, and a test
 * checks docs/training.md's table against `settingsMarkdown()`.
 */
import { LOSS_TYPES } from "./losses.js";
import { IMPORTANCE_SAMPLING_MODES } from "./rollout-correction.js";
import { MAX_TENSOR_ELEMENTS, MAX_TOOL_CALLS, SHARED_SETTINGS, TOP_P, TOOL_ROWS } from "../core/defaults.js";

export type TrainMode = "sft" | "grpo";

export type SettingValue = number | string | boolean | readonly string[] | null;

export type SettingType =
  | { kind: "int" | "number"; min?: number; max?: number; gt?: number }
  | { kind: "string" }
  | { kind: "path" }
  | { kind: "bool" }
  | { kind: "enum"; options: readonly string[] }
  | { kind: "list"; options: readonly string[] }
  /** `absent`: what a missing object becomes, null (off) or its fields' defaults. */
  | { kind: "object"; absent: "null" | "defaults"; fields: readonly Setting[] };

/** What a computed default may look at: the mode and the fields of the same object read before it. */
export interface DefaultContext {
  mode: TrainMode;
  read: Record<string, unknown>;
  /** The object as the file holds it (for a default that depends on a field read later). */
  raw: Record<string, unknown>;
}

export interface Setting {
  name: string;
  /** Modes the field applies to (nested fields: those of their object). */
  modes?: readonly TrainMode[];
  type: SettingType;
  /** The value an absent field takes; undefined: the field is required. */
  default: SettingValue | undefined | ((c: DefaultContext) => SettingValue | undefined);
  /** How the docs state the default, where it is computed or not a plain value. */
  shown?: string;
  doc: string;
}

const BOTH = ["sft", "grpo"] as const;
const GRPO = ["grpo"] as const;
const SFT = ["sft"] as const;
const int = (min?: number, max?: number): SettingType => ({ kind: "int", min, max });
const num = (bounds: { min?: number; max?: number; gt?: number }): SettingType => ({ kind: "number", ...bounds });
const oneOf = (...options: string[]): SettingType => ({ kind: "enum", options });
const object = (absent: "null" | "defaults", ...fields: Setting[]): SettingType => ({ kind: "object", absent, fields });

/** Every config field, in the order docs/training.md lists them (both modes, then grpo only, then sft only). */
export const SETTINGS = [
  { name: "mode", modes: BOTH, type: oneOf("sft", "grpo"), default: (c) => c.mode, shown: "the command's", doc: "when given, must match the command (`t2s train sft` or `t2s train grpo`)" },
  { name: "model", modes: BOTH, type: { kind: "path" }, default: undefined, doc: "Hugging Face model folder (config.json, safetensors, tokenizer.json, chat template)" },
  { name: "backend", modes: BOTH, type: { kind: "string" }, default: null, shown: "T2S_BACKEND / auto", doc: "tfjs backend: webgpu, tensorflow, wasm, cpu (`--backend` overrides)" },
  {
    name: "adapter", modes: BOTH, default: null, doc: "LoRA (absent with `full_weights`)",
    type: object("defaults",
      { name: "r", type: int(1), default: 8, doc: "rank" },
      { name: "alpha", type: num({ gt: 0 }), default: (c) => c.read.r as number, shown: "= r", doc: "scale numerator (alpha / r, or alpha / sqrt(r) with rsLoRA)" },
      { name: "targets", type: { kind: "list", options: ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"] }, default: ["q_proj", "v_proj"], doc: "modules of every layer that get an adapter" },
      { name: "use_rslora", type: { kind: "bool" }, default: false, doc: "rank-stabilised scale" },
      { name: "init", type: { kind: "path" }, default: null, doc: "an existing PEFT folder to start from" },
      { name: "allow_base_mismatch", type: { kind: "bool" }, default: false, doc: "start from (or resume) an adapter recorded as trained on another base model (refused by default)" },
    ),
  },
  { name: "full_weights", modes: BOTH, type: { kind: "bool" }, default: false, doc: "train every weight instead of an adapter (no `adapter`, beta must be 0)" },
  { name: "tasks", modes: BOTH, type: { kind: "path" }, default: (c) => (c.raw.conversations !== undefined ? "" : undefined), shown: "required (sft: none with `conversations`)", doc: "task jsonl file" },
  { name: "split", modes: BOTH, type: oneOf("train", "holdout", "all"), default: "train", doc: "which tasks of the file" },
  {
    name: "band", modes: BOTH, default: null,
    doc: "only tasks whose pass rate in the rows file (correct rows / rows, pooled over samples and eval runs) lies in [lo, hi]",
    type: object("null",
      { name: "rows", type: { kind: "path" }, default: undefined, doc: "a rows file of an earlier run" },
      { name: "lo", type: num({ min: 0, max: 1 }), default: 0.1, doc: "lowest pass rate kept" },
      { name: "hi", type: num({ min: 0, max: 1 }), default: 0.9, doc: "highest pass rate kept" },
    ),
  },
  { name: "limit", modes: BOTH, type: int(1), default: null, doc: "only the first N tasks after split and band" },
  { name: "steps", modes: BOTH, type: int(0), default: (c) => (c.mode === "grpo" ? undefined : 0), shown: "grpo: required; sft: from epochs", doc: "optimizer steps (grpo: trainer steps, at least 1; each does `mu` updates)" },
  { name: "seed", modes: BOTH, type: int(0), default: 0, doc: "seeds prompt order, sampling and adapter init" },
  { name: "output_dir", modes: BOTH, type: { kind: "path" }, default: undefined, doc: "checkpoints, train_log.jsonl, eval.jsonl, adapter/" },
  { name: "checkpoint_every", modes: BOTH, type: int(0), default: 0, doc: "also checkpoint every N steps (always after the last)" },
  { name: "keep_checkpoints", modes: BOTH, type: int(0), default: 0, doc: "keep only the newest N checkpoints, deleting older ones after each save (0 = keep all); each holds the trainable weights and two AdamW moments, ~3x the weights" },
  { name: "lr", modes: BOTH, type: num({ gt: 0 }), default: (c) => (c.mode === "grpo" ? 1e-6 : 1e-5), shown: "grpo 1e-6, sft 1e-5", doc: "peak learning rate" },
  { name: "schedule", modes: BOTH, type: oneOf("constant", "cosine"), default: "constant", doc: "learning-rate schedule after warm-up" },
  { name: "warmup_steps", modes: BOTH, type: int(0), default: 0, doc: "linear warm-up updates (grpo: at most `steps`)" },
  { name: "min_lr_ratio", modes: BOTH, type: num({ min: 0, max: 1 }), default: 0, doc: "floor of the cosine, as a fraction of lr" },
  { name: "weight_decay", modes: BOTH, type: num({ min: 0 }), default: 0, doc: "AdamW decoupled weight decay" },
  { name: "max_grad_norm", modes: BOTH, type: num({ min: 0 }), default: 1, doc: "global gradient-norm clip (0 = off)" },
  { name: "max_tensor_elements", modes: BOTH, type: int(1), default: MAX_TENSOR_ELEMENTS, doc: "cap on the values of one micro-batch's scored tensor (B x T x the hidden size with logit chunks, x vocab without), of one logit chunk and of one row group's widest activation" },
  { name: "micro_batch_rows", modes: BOTH, type: int(0), default: 0, doc: "rows per micro-batch at most (0 = no limit)" },
  { name: "logit_chunk_tokens", modes: BOTH, type: int(0), default: 1024, doc: "scored positions whose vocabulary logits the learner computes at once; the log-probs' backward recomputes each chunk, so no [positions x vocab] tensor (logits or their gradient) exists whole (0 = all at once)" },
  { name: "weights_dtype", modes: BOTH, type: oneOf("auto", "fp32", "bf16"), default: "auto", doc: "storage of the frozen base's matrices on the device: auto keeps a bf16/f16 checkpoint 16-bit on WebGPU; full_weights always trains float32 masters" },
  { name: "gradient_checkpointing", modes: BOTH, type: oneOf("auto", "on", "off"), default: "auto", doc: "recompute each decoder layer in the backward instead of keeping its activations; auto: on with 16-bit weights or when the memory plan needs it" },
  {
    name: "episode", modes: BOTH, default: null, doc: "how an episode runs",
    type: object("defaults",
      { name: "style", type: oneOf("single", "tool"), default: "single", doc: "one reply, or turns with the SQL tool" },
      { name: "protocol", type: oneOf("native", "hermes"), default: "native", doc: "how tool calls are written" },
      { name: "max_tool_calls", type: int(0), default: MAX_TOOL_CALLS, doc: "tool calls per episode at most" },
      { name: "min_tool_calls", type: int(0), default: 0, doc: "GRPO, tool style: an episode with fewer valid tool calls earns at most 0 (its correct stays as graded)" },
      { name: "max_context_tokens", type: int(16), default: 4096, doc: "prompt and replies at most" },
      { name: "tool_rows", type: int(1), default: TOOL_ROWS, doc: "rows a tool result shows at most (the prompt says so)" },
    ),
  },
  { name: "prompts_per_step", modes: GRPO, type: int(1), default: 8, doc: "P" },
  { name: "group_size", modes: GRPO, type: int(2), default: 8, doc: "G" },
  { name: "loss_type", modes: GRPO, type: { kind: "enum", options: LOSS_TYPES }, default: "dapo", doc: "how token losses are averaged (see above)" },
  { name: "epsilon_low", modes: GRPO, type: num({ min: 0, max: 1 }), default: 0.2, doc: "lower clip bound" },
  { name: "epsilon_high", modes: GRPO, type: num({ gt: 0 }), default: (c) => (c.read.loss_type === "cispo" ? 5 : 0.28), shown: "0.28 (cispo: 5)", doc: "upper clip bound (cispo: the absolute cap on the importance weight, >= 1)" },
  { name: "beta", modes: GRPO, type: num({ min: 0 }), default: 0, doc: "KL coefficient (k3) against the adapter-off reference" },
  { name: "scale_rewards", modes: GRPO, type: oneOf("group", "batch", "none"), default: "group", doc: "advantage scaling (see above)" },
  { name: "mu", modes: GRPO, type: int(1), default: 1, doc: "optimisation passes per generated batch" },
  { name: "mask_truncated", modes: GRPO, type: { kind: "bool" }, default: false, doc: "leave episodes cut by a token budget out of the loss" },
  { name: "reward_preset", modes: GRPO, type: oneOf("shaped", "binary", "tool-rl"), default: "shaped", doc: "reward preset of lib/verifier" },
  {
    name: "sampling", modes: GRPO, default: null, doc: "how episodes are sampled",
    type: object("defaults",
      { name: "temperature", type: num({ gt: 0 }), default: 1, doc: "sampling temperature" },
      { name: "top_p", type: num({ gt: 0, max: 1 }), default: TOP_P, doc: "nucleus mass" },
      { name: "max_tokens", type: int(1), default: 512, doc: "per turn; also dr_grpo's constant" },
      { name: "quantization", type: oneOf(...SHARED_SETTINGS.quantization.type.options), default: SHARED_SETTINGS.quantization.default, doc: "the sampler's linear layers: none, or int8 (W8A8 on the GPU's matrix units, WebGPU with int8 subgroup matrices; the learner keeps its own precision, so set the importance-sampling correction)" },
      { name: "kv_cache_dtype", type: oneOf(...SHARED_SETTINGS.kv_cache_dtype.type.options), default: SHARED_SETTINGS.kv_cache_dtype.default, doc: "the sampler's KV cache on the WebGPU step runner: fp16 or bf16 (half the bytes, math in float32), fp32, or auto (fp16 when the weights are 16-bit on the device, else fp32); the memory plan counts it at this size" },
      { name: "max_batch", type: int(1), default: 64, doc: "episodes' turns sampled together in one decode loop; P x G puts a whole step in one loop, fastest on a GPU while the batch's activations fit: on the H200, 256 episodes of the default model took 14.8 s per step at 64 and 7.2 s at 256" },
      { name: "prefix_caching", type: { kind: "bool" }, default: true, doc: "keep prompts' keys and values within a step (the G samples of a prompt, every prompt's system part, an episode's earlier turns) and prefill only the rest; the train log's `prefix_cache_hit_rate` says how much was found (docs/model.md, Prefix caching)" },
    ),
  },
  { name: "vllm_importance_sampling_correction", modes: GRPO, type: { kind: "bool" }, default: true, doc: "weight each token's policy-gradient loss by the detached ratio π_learner_old / π_sampler, the correction for the rollout/learner mismatch (TRL's name; see \"Rollout/learner mismatch\")" },
  { name: "vllm_importance_sampling_mode", modes: GRPO, type: { kind: "enum", options: IMPORTANCE_SAMPLING_MODES }, default: "token_truncate", doc: "token_truncate: weight min(ratio, cap) (TIS); token_mask: the ratio, and 0 for tokens whose ratio exceeds the cap" },
  { name: "vllm_importance_sampling_cap", modes: GRPO, type: num({ min: 1 }), default: 2, doc: "the ratio above which a token's weight is truncated or dropped" },
  {
    name: "eval", modes: GRPO, default: null, doc: "rollout rows in eval.jsonl during training",
    type: object("null",
      { name: "every", type: int(1), default: undefined, doc: "steps between evaluations" },
      { name: "split", type: oneOf("train", "holdout"), default: "holdout", doc: "which tasks" },
      { name: "limit", type: int(1), default: 50, doc: "tasks at most" },
      { name: "samples", type: int(1), default: 1, doc: "samples per task" },
    ),
  },
  { name: "conversations", modes: SFT, type: { kind: "path" }, default: null, doc: "a conversations file (JSONL of {messages, tools?}) to train on instead of the tasks' gold replies" },
  { name: "batch_size", modes: SFT, type: int(1), default: 8, doc: "examples per optimizer step" },
  { name: "epochs", modes: SFT, type: int(1), default: 1, doc: "passes over the data (when `steps` is 0)" },
] as const satisfies readonly Setting[];

/** Keys a config file may hold that are no settings (a JSON schema reference, a note). */
export const IGNORED_KEYS = ["$schema", "comment"] as const;

/** The setting named `name` ("sampling.temperature" for a nested one). */
export function settingOf(name: string): Setting {
  const [top, sub] = name.split(".");
  const s = (SETTINGS as readonly Setting[]).find((x) => x.name === top);
  const found = sub === undefined ? s : s?.type.kind === "object" ? s.type.fields.find((x) => x.name === sub) : undefined;
  if (!found) throw new Error(`no training setting ${name}`);
  return found;
}

/** The default of a setting for `mode`, given the fields of its object read so far; undefined: required. */
export function defaultOf(name: string, mode: TrainMode, read: Record<string, unknown> = {}, raw: Record<string, unknown> = {}): SettingValue | undefined {
  const d = settingOf(name).default;
  return typeof d === "function" ? d({ mode, read, raw }) : d;
}

/** The type of a setting in words: "integer >= 2", "number in [0, 1]", `"group" | "batch" | "none"`, ... */
export function typeText(t: SettingType): string {
  switch (t.kind) {
    case "int":
    case "number": {
      const what = t.kind === "int" ? "integer" : "number";
      if (t.min !== undefined && t.max !== undefined) return `${what} in [${t.min}, ${t.max}]`;
      if (t.gt !== undefined && t.max !== undefined) return `${what} in (${t.gt}, ${t.max}]`;
      if (t.gt !== undefined) return `${what} > ${t.gt}`;
      if (t.min !== undefined) return `${what} >= ${t.min}`;
      return what;
    }
    case "enum":
      return t.options.map((o) => `"${o}"`).join(" \\| ");
    case "list":
      return `list of ${t.options.join(", ")}`;
    case "object":
      return "object";
    default:
      return t.kind;
  }
}

function shownDefault(s: Setting): string {
  if (s.shown !== undefined) return s.shown;
  if (s.type.kind === "object") return s.type.absent === "null" ? "none" : "`{}`";
  const d = s.default;
  if (d === undefined) return "required";
  if (d === null) return "none";
  if (typeof d === "function") throw new Error(`setting ${s.name} computes its default: give it a shown text`);
  return JSON.stringify(d);
}

function meaning(s: Setting): string {
  if (s.type.kind !== "object") return s.doc;
  const fields = s.type.fields.map((f) => `\`${f.name}\` (${typeText(f.type)}, ${shownDefault(f)}): ${f.doc}`);
  return `${s.doc}: ${fields.join("; ")}`;
}

/** The settings table of docs/training.md, as markdown lines. */
export function settingsMarkdown(): string[] {
  const out = ["| field | type | default | meaning |", "|---|---|---|---|"];
  let section = "";
  for (const s of SETTINGS as readonly Setting[]) {
    const modes = (s.modes ?? BOTH).join("/");
    if (modes !== section && modes !== "sft/grpo") out.push(`| **${modes} only** | | | |`);
    section = modes;
    out.push(`| \`${s.name}\` | ${typeText(s.type)} | ${shownDefault(s)} | ${meaning(s)} |`);
  }
  return out;
}
