/** What callers hand the generation engine and what they get back. */

/** Why a sequence ended: a stop (string, token or end id) or the token budget. */
export type GenerationFinish = "stop" | "length";

/** The sampling settings a request may set: the engine's sequences and the chat layer's requests share them. */
export interface SamplingSettings {
  /** New tokens at most (default 256; never past the model's context). */
  maxTokens?: number;
  /** At least this many new tokens: end ids are banned until then (vLLM's min_tokens). */
  minTokens?: number;
  stop?: string[];
  /** Token ids that end the sequence besides the eos ids (vLLM's stop_token_ids). */
  stopTokenIds?: number[];
  /** Keep going past eos ids (vLLM's ignore_eos); stop strings and stopTokenIds still end it. */
  ignoreEos?: boolean;
  seed?: number;
  /** 0 = greedy (default 1). */
  temperature?: number;
  topP?: number;
  topK?: number;
  /** OpenAI's penalties: each generated id's logit drops by presence + frequency x its count. */
  presencePenalty?: number;
  frequencyPenalty?: number;
  /** Report the n most likely tokens at each step. */
  topLogprobs?: number;
  /** Keep the stop string that ended the text at its end (vLLM's include_stop_str_in_output). */
  includeStopStr?: boolean;
  /** Drop special tokens from the text (default true; vLLM's skip_special_tokens). */
  skipSpecialTokens?: boolean;
  /**
   * Which log-probabilities are reported: "processed" (default: under softmax((logits + bias) / T) with the
   * guided mask applied, the distribution the token was drawn from, which GRPO's ratio uses) or "raw" (the
   * model's own log_softmax(logits), independent of temperature, bias and masks: vLLM's raw_logprobs).
   */
  logprobsMode?: "raw" | "processed";
}

/**
 * Guided decoding's state for one sequence (lib/model/guided.ts): the tokens allowed next as a bitmask
 * (bit i % 32 of word i >> 5), advanced by each sampled token; a finished grammar ends the sequence.
 */
export interface TokenConstraint {
  /** The mask for the next token, given the tokens the sequence may still have (a guide closes its text in time). */
  nextMask(remaining: number): Promise<Int32Array>;
  /** Advances by a sampled token; false when the grammar cannot take it (a grammar in a worker answers later). */
  accept(id: number): boolean | Promise<boolean>;
  /** The grammar is complete: nothing more may follow. */
  finished(): boolean;
  dispose(): void;
}

/** One sequence to generate: a prompt (token ids) and its own limits and sampling settings. */
export interface SequenceRequest extends SamplingSettings {
  ids: number[];
  /** Which sample of its request this row is (rows of one seed draw different streams). */
  sampleIndex?: number;
  /** Added to the logits of these ids (OpenAI's logit_bias). */
  logitBias?: Iterable<[number, number]>;
  /** Leading tokens of `ids` that other requests share (a system prompt), attended to from one stored copy. */
  prefixLength?: number;
  /** Guided decoding: only tokens it allows are sampled; the engine disposes it when the sequence ends. */
  constraint?: TokenConstraint;
  /** Aborting frees the sequence's slot at the next step; the promise rejects with T2sError("cancelled"). */
  signal?: AbortSignal;
  /** Receives each step's new tokens and the text that became safe to show. */
  onDelta?: (d: TokenDelta) => void;
}

/** The new tokens of one step of one sequence (several when the runner chained steps). */
export interface TokenDelta {
  ids: number[];
  logprobs: number[];
  top?: { id: number; logprob: number }[][];
  /** Text released by these tokens (may be "" while a stop string or UTF-8 character is incomplete). */
  text: string;
}

export interface Generation {
  /** New token ids, including the end id that ended it (if any). */
  ids: number[];
  /** The decoded text without the end token and cut before a stop string. */
  text: string;
  /** Log-probability of each new token under softmax((logits + bias) / temperature). */
  logprobs: number[];
  /** The most likely tokens at each step, when asked for. */
  topLogprobs?: { id: number; logprob: number }[][];
  finishReason: GenerationFinish;
  /** The stop string, "eos", "token:<id>" or "grammar" (a guided reply completed) that ended it (stop only). */
  stoppedBy?: string;
  promptTokens: number;
}

/** How an engine is set up (GenerationEngine.create). */
export interface EngineOptions {
  /** Unmerged adapter applied to every sequence (the model's own weights when null). */
  adapter?: string | null;
  /** Sequences decoded together at most (default 64). */
  maxBatch?: number;
  /** Prompt tokens (not counting a shared prefix) prefilled in one call at most (default: the runner's). */
  maxPrefillTokens?: number;
  /** Decode steps per runner call when the runner can chain them on the device (default: the runner's). */
  stepsPerCall?: number;
  /** Ids that end a sequence (default: the tokenizer's eos ids, else config.json's). */
  eosIds?: number[];
  /** Tokens per sequence (prompt + completion) the runner's cache holds (default: the runner's cap). */
  maxLength?: number;
  /**
   * Keep prompts' keys and values across requests and prefill only what a new prompt does not share with a
   * stored one (vLLM's --enable-prefix-caching; default true). Off, prompts are shared only within one
   * prefill call.
   */
  enablePrefixCaching?: boolean;
  /** Tokens of keys and values the prefix cache holds (default PREFIX_CACHE_TOKENS; prefix-cache.ts). */
  prefixCacheTokens?: number;
}

/** Counters for /metrics and benchmarks. */
export interface EngineMetrics {
  running: number;
  waiting: number;
  steps: number;
  promptTokens: number;
  generatedTokens: number;
  /** Rows decoded per step, summed (mean batch = batchRows / steps). */
  batchRows: number;
  finished: number;
  cancelled: number;
  /** Seconds sequences waited from submission to their slot, summed, and how many were admitted. */
  queueSeconds: { sum: number; count: number };
  /** Prompt tokens looked up in the prefix cache (vLLM's prefix_cache_queries; 0 with caching off). */
  prefixCacheQueries: number;
  /** Of those, tokens found there and not computed again (vLLM's prefix_cache_hits). */
  prefixCacheHits: number;
}

/** Engine counters at zero. */
export function emptyEngineMetrics(): EngineMetrics {
  return { running: 0, waiting: 0, steps: 0, promptTokens: 0, generatedTokens: 0, batchRows: 0, finished: 0, cancelled: 0, queueSeconds: { sum: 0, count: 0 }, prefixCacheQueries: 0, prefixCacheHits: 0 };
}
