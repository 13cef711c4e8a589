/**
 * Request parameters shared by /v1/chat/completions and /v1/completions: the OpenAI and vLLM sampling
 * parameters the engine honours, and the rule for everything else. A parameter that would change the
 * output and is not honoured is a 400 naming it (never silently ignored); one that cannot change the
 * output (`user`, `metadata`, ...) is accepted; one that is known but left at its no-op value
 * (`repetition_penalty: 1`, `use_beam_search: false`) is accepted too, so clients that send defaults work.
 */
import type { SamplingRequest } from "../model/chat.js";
import type { Guide } from "../model/guided.js";

/** OpenAI's response_format (text, json_object, json_schema) or vLLM's guided_json, as a guide. */
export function parseGuide(body: Record<string, unknown>): Guide | undefined {
  const schemaOf = (v: unknown, param: string): Guide => {
    if (typeof v === "boolean" || (v && typeof v === "object" && !Array.isArray(v))) return { kind: "schema", schema: v };
    throw bad(param, `'${param}' must be a JSON Schema (an object)`);
  };
  const rf = body.response_format;
  if (rf !== undefined && rf !== null) {
    if (typeof rf !== "object" || Array.isArray(rf)) throw bad("response_format", "'response_format' must be an object with a 'type'");
    const type = (rf as { type?: unknown }).type;
    if (type === "text") return undefined;
    if (type === "json_object") return { kind: "json" };
    if (type === "json_schema") {
      const js = (rf as { json_schema?: { schema?: unknown } }).json_schema;
      if (!js || typeof js !== "object") throw bad("response_format", "response_format 'json_schema' needs a 'json_schema' object with a 'schema'");
      return schemaOf(js.schema ?? {}, "response_format.json_schema.schema");
    }
    throw bad("response_format", `response_format type must be "text", "json_object" or "json_schema", got ${JSON.stringify(type)}`);
  }
  const gj = body.guided_json;
  if (gj !== undefined && gj !== null) return schemaOf(typeof gj === "string" ? safeJson(gj, "guided_json") : gj, "guided_json");
  return undefined;
}

function safeJson(text: string, param: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    throw bad(param, `'${param}' is not valid JSON`);
  }
}

/** A request problem the client can fix: answered with `status` and an OpenAI-style error body. */
export class RequestError extends Error {
  readonly status: number;
  readonly param: string | null;
  readonly code: string | null;
  readonly type: string;
  constructor(status: number, message: string, opts: { param?: string; code?: string; type?: string } = {}) {
    super(message);
    this.status = status;
    this.param = opts.param ?? null;
    this.code = opts.code ?? null;
    this.type = opts.type ?? (status >= 500 ? "server_error" : status === 404 ? "not_found_error" : "invalid_request_error");
  }
}

/** A 400 naming the field. */
export function bad(param: string, message: string): RequestError {
  return new RequestError(400, message, { param });
}

/** An optional number field in [min, max] (an integer when asked), or undefined when absent or null. */
export function optNumber(body: Record<string, unknown>, key: string, min: number, max: number, integer = false): number | undefined {
  const v = body[key];
  if (v === undefined || v === null) return undefined;
  if (typeof v !== "number" || !Number.isFinite(v) || (integer && !Number.isInteger(v)) || v < min || v > max) {
    throw bad(key, `'${key}' must be ${integer ? "an integer" : "a number"} in [${min}, ${max}], got ${JSON.stringify(v)}`);
  }
  return v;
}

function optBoolean(body: Record<string, unknown>, key: string): boolean | undefined {
  const v = body[key];
  if (v === undefined || v === null) return undefined;
  if (typeof v !== "boolean") throw bad(key, `'${key}' must be a boolean`);
  return v;
}

/** An optional list of token ids (each an integer in [0, vocab)). */
export function optTokenIds(body: Record<string, unknown>, key: string, vocab: number): number[] | undefined {
  const v = body[key];
  if (v === undefined || v === null) return undefined;
  if (!Array.isArray(v) || v.some((id) => !Number.isInteger(id) || id < 0 || id >= vocab)) throw bad(key, `'${key}' must be an array of token ids in [0, ${vocab})`);
  return v as number[];
}

/** Parameters that never change the output. */
const HARMLESS: ReadonlySet<string> = new Set(["user", "metadata", "store", "parallel_tool_calls", "service_tier", "stream_options", "request_id", "priority", "prompt_cache_key", "safety_identifier", "cache_salt", "kv_transfer_params", "vllm_xargs"]);

/**
 * Known parameters the engine does not implement, with the values that leave the output unchanged. A Map,
 * never a plain object: a body key such as `__proto__`, `constructor` or `valueOf` must not find
 * Object.prototype's members.
 */
const NO_OP: ReadonlyMap<string, (v: unknown) => boolean> = new Map(Object.entries({
  repetition_penalty: (v) => v === 1,
  min_p: (v) => v === 0,
  top_a: (v) => v === 0,
  typical_p: (v) => v === 1,
  length_penalty: (v) => v === 1,
  use_beam_search: (v) => v === false,
  early_stopping: (v) => v === false,
  spaces_between_special_tokens: (v) => v === true,
  prompt_logprobs: (v) => v === 0,
  bad_words: (v) => Array.isArray(v) && v.length === 0,
  allowed_token_ids: () => false,
  guided_regex: () => false,
  guided_choice: () => false,
  guided_grammar: () => false,
  guided_decoding_backend: () => false,
  guided_whitespace_pattern: () => false,
  structured_outputs: () => false,
  logits_processors: () => false,
  functions: () => false,
  function_call: () => false,
  modalities: (v) => Array.isArray(v) && v.length === 1 && v[0] === "text",
  audio: () => false,
  prediction: () => false,
  reasoning_effort: () => false,
  web_search_options: () => false,
  chat_template: () => false,
  mm_processor_kwargs: () => false,
  documents: () => false,
  continue_final_message: (v) => v === false,
  add_generation_prompt: (v) => v === true,
  suffix: () => false,
  echo: (v) => v === false,
  best_of: (v) => v === 1,
} satisfies Record<string, (v: unknown) => boolean>));

/**
 * Refuses the fields of `body` that are neither honoured by this route (`honoured`) nor harmless nor at a
 * no-op value; null counts as absent. One 400 names every refused field (its `param` is the first), so a
 * client fixes its request in one round.
 */
export function refuseUnsupported(body: Record<string, unknown>, honoured: ReadonlySet<string>): void {
  const unknown: string[] = [];
  const unsupported: string[] = [];
  for (const key of Object.keys(body)) {
    const v = body[key];
    if (honoured.has(key) || HARMLESS.has(key) || v === null || v === undefined) continue;
    const noOp = NO_OP.get(key);
    if (noOp === undefined) unknown.push(key);
    else if (!noOp(v)) unsupported.push(key);
  }
  if (!unknown.length && !unsupported.length) return;
  const parts: string[] = [];
  const names = (keys: string[]) => keys.map((k) => `'${k}'`).join(", ");
  if (unsupported.length) parts.push(`${names(unsupported)} ${unsupported.length > 1 ? "are" : "is"} not supported by this server at the value given (it would change the output and the engine does not implement it); leave ${unsupported.length > 1 ? "them" : "it"} out`);
  if (unknown.length) parts.push(`${names(unknown)} ${unknown.length > 1 ? "are not parameters" : "is not a parameter"} this server knows; refused rather than ignored, since ${unknown.length > 1 ? "they" : "it"} may be meant to change the output`);
  throw new RequestError(400, parts.join("; "), { param: [...unsupported, ...unknown][0] });
}

/** Reads an own field of a parsed body (never one inherited from Object.prototype). */
export function field(body: Record<string, unknown>, key: string): unknown {
  return Object.hasOwn(body, key) ? body[key] : undefined;
}

/** Parameters every generating route honours. */
export const SAMPLING_KEYS = ["include_stop_str_in_output", "skip_special_tokens", "response_format", "guided_json", "return_tokens_as_token_ids", "truncate_prompt_tokens", "model", "n", "temperature", "top_p", "top_k", "max_tokens", "min_tokens", "stop", "stop_token_ids", "ignore_eos", "seed", "logit_bias", "presence_penalty", "frequency_penalty", "logprobs", "stream"];

export interface StreamOptions {
  stream: boolean;
  includeUsage: boolean;
  /** vLLM's stream_options.continuous_usage_stats: every chunk carries the usage so far. */
  continuousUsage: boolean;
}

/** The sampling part of a request body (stop strings, penalties, vLLM's extras); `vocab` bounds token ids. */
export function parseSampling(body: Record<string, unknown>, vocab: number): SamplingRequest & StreamOptions {
  let stop: string[] | undefined;
  if (typeof body.stop === "string") stop = [body.stop];
  else if (Array.isArray(body.stop)) {
    if (body.stop.length > 16 || body.stop.some((s) => typeof s !== "string")) throw bad("stop", "'stop' must be a string or an array of at most 16 strings");
    stop = body.stop as string[];
  } else if (body.stop !== undefined && body.stop !== null) throw bad("stop", "'stop' must be a string or an array of strings");
  let logitBias: Record<string, number> | undefined;
  if (body.logit_bias !== undefined && body.logit_bias !== null) {
    if (typeof body.logit_bias !== "object" || Array.isArray(body.logit_bias)) throw bad("logit_bias", "'logit_bias' must be an object of token id -> bias");
    logitBias = {};
    for (const [k, b] of Object.entries(body.logit_bias as Record<string, unknown>)) {
      const id = Number(k);
      if (!/^\d+$/.test(k) || id >= vocab) throw bad("logit_bias", `logit_bias key '${k}' is not a token id in [0, ${vocab})`);
      if (typeof b !== "number" || !(b >= -100 && b <= 100)) throw bad("logit_bias", `logit_bias['${k}'] must be a number in [-100, 100]`);
      logitBias[k] = b;
    }
  }
  const topK = optNumber(body, "top_k", -1, vocab, true);
  // 0 is allowed (vLLM): nothing is generated, which with echo and logprobs scores a prompt
  const maxTokens = optNumber(body, "max_completion_tokens", 0, 1e9, true) ?? optNumber(body, "max_tokens", 0, 1e9, true);
  const minTokens = optNumber(body, "min_tokens", 0, 1e9, true);
  if (minTokens !== undefined && maxTokens !== undefined && minTokens > maxTokens) throw bad("min_tokens", `'min_tokens' (${minTokens}) is more than 'max_tokens' (${maxTokens})`);
  const streamOptions = body.stream_options as { include_usage?: unknown; continuous_usage_stats?: unknown } | undefined;
  return {
    n: optNumber(body, "n", 1, 64, true),
    temperature: optNumber(body, "temperature", 0, 2),
    topP: optNumber(body, "top_p", Number.MIN_VALUE, 1),
    // vLLM: -1 (and 0) mean no top-k cut
    topK: topK === undefined || topK <= 0 ? undefined : topK,
    maxTokens,
    minTokens,
    stop,
    stopTokenIds: optTokenIds(body, "stop_token_ids", vocab),
    ignoreEos: optBoolean(body, "ignore_eos"),
    seed: optNumber(body, "seed", -(2 ** 53), 2 ** 53, true),
    logitBias,
    presencePenalty: optNumber(body, "presence_penalty", -2, 2),
    frequencyPenalty: optNumber(body, "frequency_penalty", -2, 2),
    refuseOverlong: true,
    includeStopStr: optBoolean(body, "include_stop_str_in_output"),
    skipSpecialTokens: optBoolean(body, "skip_special_tokens"),
    guide: parseGuide(body),
    stream: optBoolean(body, "stream") ?? false,
    includeUsage: streamOptions?.include_usage === true,
    continuousUsage: streamOptions?.continuous_usage_stats === true,
  };
}
