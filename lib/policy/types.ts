/**
 * The Policy contract: chat messages (+ optional tool definitions) and sampling options in, completions
 * out. Every backend (an OpenAI-compatible server, the in-process model, scripted replies) speaks it, so
 * episodes never know which one they talk to.
 */

/** The message types are the kit's one chat message (lib/core/messages.ts). */
import type { ChatMessage, ToolCall } from "../core/messages.js";
export type { ChatMessage, ChatRole, ToolCall } from "../core/messages.js";

/** An OpenAI-style function tool definition. */
export interface ToolSpec {
  type: "function";
  function: { name: string; description: string; parameters: Record<string, unknown> };
}

export type FinishReason = "stop" | "length" | "tool_calls";

/**
 * How replies are sampled: the one shape of the sampling settings from the CLI flags and the training
 * config through the episode loop (lib/episode/loop.ts) and the rows' metadata to a policy request. An
 * absent field leaves the policy's own default (a server's, the engine's).
 */
export interface Sampling {
  temperature?: number;
  top_p?: number;
  /** Tokens per turn; a reply cut by it ends the episode as truncated. */
  max_tokens?: number;
  stop?: string[];
  /** The request's seed (an episode's first turn; turn t uses seed + t). */
  seed?: number;
}

export interface SampleOptions extends Sampling {
  /** Completions to return for the same messages (default 1). */
  n?: number;
  /** Called each time a request is retried (429, 5xx, connection error, timeout): a re-roll, not a failure. */
  onRetry?: (reason: string, attempt: number) => void;
  /** Cancels the request (the rollout stops). */
  signal?: AbortSignal;
}

export interface Completion {
  text: string;
  tool_calls: ToolCall[];
  finish_reason: FinishReason;
  tokens_in: number;
  tokens_out: number;
  latency_ms: number;
  /** The server that answered, for policies that spread requests over several (an OpenAI fleet). */
  endpoint?: string;
}

export interface Policy {
  /** The spec it was made from, e.g. "openai:qwen@http://localhost:8000/v1". */
  name: string;
  /** The model name sent to (or served by) the backend. */
  model?: string;
  /** The adapter applied on top of the model, if any. */
  adapter?: string | null;
  /** How an in-process model's linear layers sample ("int8"), when not at the weights' precision. */
  quantization?: string | null;
  complete(messages: ChatMessage[], opts: SampleOptions & { tools?: ToolSpec[] }): Promise<Completion[]>;
  /** Tokens of the prompt `messages` (+ tools) make for this model, its own chat template and tokenizer
   * counting; absent where the policy cannot count them (what context padding needs). */
  promptTokens?(messages: ChatMessage[], tools?: ToolSpec[]): Promise<number>;
  /** Tokens of prompt + reply the model takes in all, when known. */
  contextWindow?(): number | null;
  /** Waits until the backend answers (optional; servers that are still loading). */
  warmup?(timeoutMs: number, pollMs?: number): Promise<void>;
  close?(): Promise<void>;
}

/**
 * A request that could not be served. `retryable` errors (429, 5xx, connection, timeout) were already
 * retried by the client; when one escapes, the episode is lost (not scored), never counted as the model's
 * failure. `reason` is a short key for counting ("http_500", "timeout", "connection", "http_400").
 * A `setup` error is a refusal caused by how the run is set up, not by the model: the prompt does not fit
 * the model's context ("context_exceeded"), the key ("auth"), the model name or URL ("not_found"). An
 * episode refused for one is recorded as a setup error, apart from the model's outcomes, never scored.
 */
export class PolicyError extends Error {
  readonly reason: string;
  readonly retryable: boolean;
  readonly status?: number;
  /** Fatal errors stop the whole run (bad key, unknown model): retrying other episodes cannot help. */
  readonly fatal: boolean;
  /** Refused for the run's setup (context, key, model name), not for anything the model did. */
  readonly setup: boolean;
  /** The server asked to wait this long before retrying (Retry-After). */
  readonly retryAfterMs?: number;
  constructor(reason: string, message: string, opts: { retryable?: boolean; status?: number; fatal?: boolean; setup?: boolean; retryAfterMs?: number } = {}) {
    super(message);
    this.name = "PolicyError";
    this.reason = reason;
    this.retryable = opts.retryable ?? false;
    this.status = opts.status;
    this.fatal = opts.fatal ?? false;
    this.setup = opts.setup ?? false;
    this.retryAfterMs = opts.retryAfterMs;
  }
}

/** The reason of a PolicyError for a prompt that does not fit the model's context window. */
export const CONTEXT_EXCEEDED = "context_exceeded";
