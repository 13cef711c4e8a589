/**
 * The contract between the generation engine (the scheduler that admits, steps and retires sequences) and
 * a step runner (what runs the model on one backend). A runner holds up to `slots` sequences, each with its
 * own KV cache written in place, and samples every new token itself: on the GPU the logits never leave the
 * device, only token ids and log-probabilities come back. The engine owns the randomness (each row's
 * seeded stream supplies one uniform number per token), so a row's tokens depend on its seed alone, never on
 * the batch it shares a step with.
 */
import type { PrefixCacheCounters } from "./prefix-cache.js";

/** How one row's next token is chosen. */
export interface RowSampling {
  /** 0 = greedy. */
  temperature: number;
  /** Nucleus mass in (0, 1]; 1 = no cut. */
  topP: number;
  /** 0 = no top-k cut. */
  topK: number;
  /** A uniform number in [0, 1) from the row's seeded stream (ignored when greedy). */
  u: number;
  /** Added to the logits before the temperature (-Infinity bans a token): logit_bias, penalties, min_tokens. */
  bias?: ReadonlyMap<number, number>;
  /** How many of the most likely tokens to report with their log-probabilities (0 = none). */
  topLogprobs?: number;
  /** Report the model's raw log_softmax(logits) (before bias, mask and temperature) instead of the processed ones. */
  rawLogprobs?: boolean;
  /**
   * Guided decoding: the tokens allowed next, as a bitmask of ceil(V / 32) words (bit i % 32 of word i >> 5);
   * every other token is banned before sampling. Undefined: no mask.
   */
  allowed?: Int32Array;
}

/** A sampled token with its log-probability under softmax((logits + bias) / T) before the top-k/top-p cuts. */
export interface SampledToken {
  id: number;
  logprob: number;
  /** The `topLogprobs` most likely tokens, most likely first (same distribution as `logprob`). */
  top?: { id: number; logprob: number }[];
}

/** A sequence entering a slot: its whole prompt, of which the first `prefixLength` tokens may be shared. */
export interface PrefillRow {
  slot: number;
  ids: number[];
  /**
   * Tokens at the start of `ids` that other sequences may share (a system prompt): a runner may compute them
   * once and attend to one stored copy. It is a property of the request, so the arithmetic of a row does not
   * depend on which rows it happens to be batched with. 0 = nothing shared.
   */
  prefixLength: number;
  sampling: RowSampling;
}

/** One new token for a sequence already in a slot: the token it just sampled, at absolute `position`. */
export interface DecodeRow {
  slot: number;
  id: number;
  position: number;
  sampling: RowSampling;
}

export interface StepRunner {
  /** Sequences it holds at once. */
  readonly slots: number;
  /**
   * Prompt tokens one prefill call should hold at most (a CPU call blocks for its whole length; a GPU one
   * wants as many as can be admitted). The engine's `maxPrefillTokens` overrides it. Default 8192.
   */
  readonly prefillTokens?: number;
  /** Decode steps one decodeSteps call should chain when nothing waits for a slot (default 4). */
  readonly chainSteps?: number;
  /** Tokens (prompt + new) a slot holds, when less than the model's context (a device cache sized once). */
  readonly maxLength?: number;
  /** Fills the rows' slots with their prompts and samples each row's first new token (results in row order). */
  prefill(rows: PrefillRow[]): Promise<SampledToken[]>;
  /** Appends one token per row to its slot and samples the next (results in row order). */
  decode(rows: DecodeRow[]): Promise<SampledToken[]>;
  /** Frees a slot; its cache may be overwritten by the next prefill. */
  release(slot: number): void;
  /**
   * Its prefix cache's counters (prefix-cache.ts), summed over its prefill calls; undefined when it keeps no
   * prefixes across calls (caching off).
   */
  readonly prefixCache?: PrefixCacheCounters;
  /** The weights changed (a training step): drop whatever was computed from the old ones (shared prefixes). */
  weightsChanged?(): void;
  /** Frees everything the runner allocated. */
  dispose(): void;
}

/**
 * A runner that can take several decode steps in one call feeds each sampled token back as the next input
 * on the device, so the host reads results back once per call instead of once per token. The engine uses it
 * when no row's sampling settings change between those steps; a row that stops early has its extra tokens
 * discarded by the engine.
 */
export interface MultiStepRunner extends StepRunner {
  /** `sampling[s][r]` is row r's sampling at step s; returns `tokens[r][s]`. */
  decodeSteps(rows: Omit<DecodeRow, "sampling">[], sampling: RowSampling[][]): Promise<SampledToken[][]>;
}

/** Whether a runner supports decodeSteps. */
export function isMultiStep(r: StepRunner): r is MultiStepRunner {
  return typeof (r as Partial<MultiStepRunner>).decodeSteps === "function";
}
