/**
 * The settings several layers share, each declared once with its type, its default and what it means:
 * the CLI's flags, the training config, the rows' metadata, the episode prompt and the episode loop read
 * their defaults from here, so a prompt can never promise a budget the loop does not enforce, and a
 * benchmark and a training run that leave a setting out mean the same value. test/core/defaults.test.ts
 * fails when one of these defaults is written as a literal anywhere else in lib/.
 */

/** The type of a setting's value, as the training table (lib/train/settings.ts) and the docs state it. */
export type ScalarType =
  | { kind: "int" | "number"; min?: number; max?: number; gt?: number }
  | { kind: "string" }
  | { kind: "enum"; options: readonly string[] };

/** One shared setting: its name as config files and rows metadata spell it, its type, default and meaning. */
export interface SharedSetting {
  name: string;
  type: ScalarType;
  default: number | string;
  /** How the docs state the default, where the plain value reads worse. */
  shown?: string;
  /** The environment variable that sets it, read only through this table (settingFromEnv). */
  env?: string;
  doc: string;
}

const int = (min: number): ScalarType => ({ kind: "int", min });
const num = (bounds: { min?: number; max?: number; gt?: number }): ScalarType => ({ kind: "number", ...bounds });

/** Every shared setting, keyed by its name. */
export const SHARED_SETTINGS = {
  tool_rows: { name: "tool_rows", type: int(1), default: 20, doc: "rows a tool result shows at most: the executor returns that many, the formatter renders them, the prompt says so" },
  tool_chars: { name: "tool_chars", type: int(16), default: 256, doc: "characters of a tool result kept when it is cut in the middle" },
  max_tool_calls: { name: "max_tool_calls", type: int(0), default: 5, doc: "tool calls per episode at most: the prompt states it and the loop enforces it" },
  max_tokens: { name: "max_tokens", type: int(1), default: 2048, doc: "tokens per turn of a benchmark episode; a reply cut by it is truncated" },
  query_timeout_ms: { name: "query_timeout_ms", type: int(1), default: 5000, doc: "time limit in ms of one SQL query run for a model or a grade (a tool call, a graded reply, a gold check)" },
  result_rows: { name: "result_rows", type: int(1), default: 200, doc: "rows a query run for grading returns at most (the spider dialect lifts it)" },
  k: { name: "k", type: int(1), default: 4, doc: "samples per task of a benchmark (the k of pass@k)" },
  temperature: { name: "temperature", type: num({ min: 0 }), default: 0.7, doc: "sampling temperature of a benchmark, of `t2s generate` and of a task-writing teacher" },
  top_p: { name: "top_p", type: num({ gt: 0, max: 1 }), default: 1, doc: "nucleus mass kept when sampling (1: all); a benchmark sends none unless asked, leaving the server's" },
  concurrency: { name: "concurrency", type: int(1), default: 8, doc: "episodes, requests or checks in flight at once" },
  engine_max_tokens: { name: "engine_max_tokens", type: int(0), default: 256, doc: "new tokens per sequence of a generation request that names no budget" },
  backend: { name: "backend", type: { kind: "enum", options: ["auto", "webgpu", "tensorflow", "wasm", "cpu"] }, default: "auto", doc: "tfjs backend when neither a flag, a config nor T2S_BACKEND names one (auto: the best that starts)" },
  quantization: { name: "quantization", type: { kind: "enum", options: ["none", "int8"] }, default: "none", doc: "how sampling and serving run the base's linear layers on WebGPU: none (the weights' precision) or int8 (W8A8 on the GPU's matrix units); a learner keeps its own precision" },
  kv_cache_dtype: { name: "kv_cache_dtype", type: { kind: "enum", options: ["auto", "fp16", "bf16", "fp32"] }, default: "auto", doc: "how the WebGPU step runner stores sampling's keys and values: fp16 or bf16 (half the bytes, math in float32) or fp32; auto: fp16 when the weights are 16-bit on the device, else fp32 (docs/model.md, 16-bit KV cache)" },
  api_key: { name: "api_key", type: { kind: "string" }, default: "", shown: "none", env: "T2S_API_KEY", doc: "API key the `openai:` policies send (unset: $OPENAI_API_KEY; none: no Authorization header) and `t2s env serve` requires of its clients unless `--api-key` names one (required off loopback)" },
  max_tensor_elements: { name: "max_tensor_elements", type: int(1), default: 2 ** 28, shown: "2^28", doc: "cap on B x T x width of one training micro-batch's scored tensor (width: the hidden size when logits come in chunks, else the vocabulary), and on one logit chunk: 2^28 floats = 1 GiB, half of WebGPU's 2 GiB binding limit" },
} as const satisfies Record<string, SharedSetting>;

export type SharedSettingName = keyof typeof SHARED_SETTINGS;

/** Rows a tool result shows at most. */
export const TOOL_ROWS: number = SHARED_SETTINGS.tool_rows.default;
/** Characters of a tool result kept when cut in the middle. */
export const TOOL_CHARS: number = SHARED_SETTINGS.tool_chars.default;
/** Tool calls per episode at most. */
export const MAX_TOOL_CALLS: number = SHARED_SETTINGS.max_tool_calls.default;
/** Tokens per turn of a benchmark episode. */
export const MAX_TOKENS_PER_TURN: number = SHARED_SETTINGS.max_tokens.default;
/** Time limit in ms of one SQL query run for a model or a grade. */
export const QUERY_TIMEOUT_MS: number = SHARED_SETTINGS.query_timeout_ms.default;
/** Rows a query run for grading returns at most. */
export const RESULT_ROWS: number = SHARED_SETTINGS.result_rows.default;
/** Samples per task of a benchmark (the k of pass@k). */
export const SAMPLES_PER_TASK: number = SHARED_SETTINGS.k.default;
/** Sampling temperature of a benchmark and of `t2s generate`. */
export const SAMPLING_TEMPERATURE: number = SHARED_SETTINGS.temperature.default;
/** Nucleus mass kept when sampling. */
export const TOP_P: number = SHARED_SETTINGS.top_p.default;
/** Episodes, requests or checks in flight at once. */
export const CONCURRENCY: number = SHARED_SETTINGS.concurrency.default;
/** New tokens per sequence of a generation request that names no budget. */
export const ENGINE_MAX_TOKENS: number = SHARED_SETTINGS.engine_max_tokens.default;
/** The tfjs backend when nothing names one. */
export const DEFAULT_BACKEND: string = SHARED_SETTINGS.backend.default;
/** Cap on B x T x vocab of one training micro-batch's logits. */
export const MAX_TENSOR_ELEMENTS: number = SHARED_SETTINGS.max_tensor_elements.default;

/** The settings an environment variable sets. */
export type EnvSettingName = { [K in SharedSettingName]: (typeof SHARED_SETTINGS)[K] extends { env: string } ? K : never }[SharedSettingName];

/**
 * The value of a setting's environment variable as set (an empty string included), or undefined when it
 * is unset: the one place lib/ reads such a variable, so every reader means the same variable.
 */
export function settingFromEnv(name: EnvSettingName, env: NodeJS.ProcessEnv = process.env): string | undefined {
  return env[SHARED_SETTINGS[name].env];
}

function typeWords(t: ScalarType): string {
  if (t.kind === "string") return "string";
  if (t.kind === "enum") return t.options.join(" \\| ");
  const what = t.kind === "int" ? "integer" : "number";
  if (t.gt !== undefined && t.max !== undefined) return `${what} in (${t.gt}, ${t.max}]`;
  if (t.min !== undefined) return `${what} >= ${t.min}`;
  return what;
}

/** The shared settings as the markdown table of docs/architecture.md ("Shared settings"). */
export function sharedSettingsMarkdown(): string[] {
  const rows = Object.values(SHARED_SETTINGS as Record<string, SharedSetting>).map((s) => `| \`${s.name}\` | ${typeWords(s.type)} | ${s.shown ?? JSON.stringify(s.default)} | ${s.doc}${s.env ? `; set by \`${s.env}\`` : ""} |`);
  return ["| setting | type | default | meaning |", "|---|---|---|---|", ...rows];
}
