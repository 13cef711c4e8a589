/**
 * How much one request may ask of `t2s serve`, checked before any prompt is tokenized or queued: an 80 KB
 * completions body of 20,000 prompts with n 64 is 1.28M sequences, enough to hold the engine for minutes.
 * vLLM's limits are the model (VLLM_MAX_COMPLETION_PROMPTS, default 1024 prompts; VLLM_MAX_N_SEQUENCES);
 * each refusal is a 400 that names its limit and the flag that raises it. Guided decoding's own limits
 * (schema size, nesting, compile time) are lib/model/guided-schema.ts's.
 */
import { bad } from "./params.js";

export interface RequestLimits {
  /** Prompts in one /v1/completions request at most (vLLM's VLLM_MAX_COMPLETION_PROMPTS). */
  maxPrompts: number;
  /** Sequences one request makes at most: prompts x n (a chat request has one prompt). */
  maxSequences: number;
}

/**
 * The defaults: vLLM's 1024 prompts; 4096 sequences is 64 full batches of the default --max-batch, more
 * than a benchmark or an lm-eval batch sends at once, and few enough that queueing them costs nothing.
 */
export const REQUEST_LIMITS: Readonly<RequestLimits> = { maxPrompts: 1024, maxSequences: 4096 };

/** A 400 unless `prompts` prompts of `n` sequences each fit the limits (checked before any tokenization). */
export function checkRequestSize(prompts: number, n: number, limits: RequestLimits = REQUEST_LIMITS): void {
  if (prompts > limits.maxPrompts) throw bad("prompt", `'prompt' holds ${prompts} prompts; this server takes at most ${limits.maxPrompts} per request (t2s serve --max-completion-prompts); split them over several requests`);
  if (prompts * n > limits.maxSequences) {
    throw bad(
      "n",
      `this request asks for ${prompts * n} sequences (${prompts} prompt${prompts === 1 ? "" : "s"} x n ${n}); this server makes at most ${limits.maxSequences} per request (t2s serve --max-request-sequences); split it over several requests`,
    );
  }
}
