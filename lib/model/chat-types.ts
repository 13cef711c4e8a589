/** The chat layer's request, result and hook types (lib/model/chat.ts runs them). */
import type { ChatMessage } from "../core/messages.js";
import type { Generation, SamplingSettings, TokenDelta } from "./engine/types.js";
import type { Guide } from "./guided.js";
import type { EngineFactory, ServedModel } from "./served-model.js";
import type { ParsedToolCall } from "./toolcalls.js";

export type { ChatMessage, ChatRole, ToolCall } from "../core/messages.js";

/**
 * Whether and which tool the reply must call: "auto" (default with tools: the model decides, calls are
 * parsed), "none" (tools are not shown to the model and the reply is not parsed), "required" (the reply is
 * a call to some tool), or a named function (the reply is a call to it).
 */
export type ToolChoice = "none" | "auto" | "required" | { name: string };

/** How to sample a prompt's continuations (shared by chat and plain completions). */
export interface SamplingRequest extends SamplingSettings {
  n?: number;
  /** OpenAI's logit_bias: token id (as text) -> bias. */
  logitBias?: Record<string, number>;
  /** A maxTokens that does not fit in the context after the prompt is an error (vLLM's 400), not cut. */
  refuseOverlong?: boolean;
  /** Guided decoding: what every reply must be (JSON, JSON of a schema); tool_choice sets its own. */
  guide?: Guide;
}

/** A chat request in the engine's terms (the HTTP layer maps OpenAI/vLLM bodies onto it). */
export interface ChatRequest extends SamplingRequest {
  model: string;
  messages: ChatMessage[];
  tools?: unknown[];
  toolChoice?: ToolChoice;
  /** Let the tokenizer add its special tokens (a BOS) to the rendered prompt (vLLM's add_special_tokens; default false: the template writes them). */
  addSpecialTokens?: boolean;
  /** Keep only the last this many prompt tokens (vLLM's truncate_prompt_tokens). */
  truncatePromptTokens?: number;
  /** Extra variables for the chat template (vLLM's chat_template_kwargs, e.g. enable_thinking). */
  templateKwargs?: Record<string, unknown>;
}

/** What a prompt is rendered from. */
export type PromptPart = Pick<ChatRequest, "model" | "messages" | "tools" | "toolChoice" | "templateKwargs" | "addSpecialTokens">;

export interface ChatChoice {
  index: number;
  /** The whole assistant reply (with the forced tool-call opening when tool_choice forced one). */
  text: string;
  content: string | null;
  toolCalls: ParsedToolCall[];
  invalidToolCalls: number;
  finishReason: "stop" | "length" | "tool_calls";
  ids: number[];
  logprobs: number[];
  topLogprobs?: { id: number; logprob: number }[][];
}

export interface ChatResult {
  model: string;
  promptTokens: number;
  /** The prompt as token ids (the chat template's rendering with the generation prompt). */
  promptIds: number[];
  completionTokens: number;
  choices: ChatChoice[];
}

export interface ChatHooks {
  /** Content pieces of each choice as they are sampled (safe to show; they concatenate to the text). */
  onText?: (choice: number, delta: string) => void;
  /** Every step's new tokens of each choice. */
  onDelta?: (choice: number, delta: TokenDelta) => void;
  /** Each choice as soon as it is finished (before the others of its request). */
  onChoice?: (choice: ChatChoice) => void;
  /** Aborting cancels every choice at the next step. */
  signal?: AbortSignal;
}

/** The generations of one prompt's rows. */
export interface IdsResult {
  model: string;
  promptIds: number[];
  generations: Generation[];
}

export interface ChatEngineOptions {
  /** Sequences decoded together per served model (default 64). */
  maxBatch?: number;
  /** Unmerged adapter applied to every request (the trainer samples the adapter it trains). */
  adapter?: string | null;
  /** Prompt tokens prefilled in one engine call at most (the engine's default when unset). */
  maxPrefillTokens?: number;
  /** Tokens per sequence the engine's cache holds (its default when unset): a trainer sizes it to its episodes. */
  maxLength?: number;
  /** Keep prompts' keys and values across requests (the engine's enablePrefixCaching; default true). */
  enablePrefixCaching?: boolean;
  /** Tokens the prefix cache holds (the engine's default when unset). */
  prefixCacheTokens?: number;
  /**
   * Tokenizes a rendered prompt for complete() (the server's worker threads); default: the model's
   * tokenizer in this thread. promptIds() always tokenizes in the thread.
   */
  tokenize?: (model: ServedModel, text: string, addSpecialTokens: boolean) => Promise<number[]>;
  /**
   * Makes a served model's engine (default: a GenerationEngine in this thread, for a CausalLM); the
   * server's engine thread gives engines whose steps run in a worker.
   */
  engines?: EngineFactory;
}

