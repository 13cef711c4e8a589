/**
 * Per-token log-probabilities of given tokens under a model, and the entropy of its next-token
 * distribution, through target-logprobs.ts's op; an LM that gives its hidden states is scored a chunk of
 * positions at a time (chunked-logprobs.ts), so not even one [B, T, V] tensor exists whole.
 */
import { tf } from "../backend/tf.js";
import type { TrainableLM } from "./lm.js";
import { chunkedTargetLogprobs } from "./chunked-logprobs.js";
import { targetLogprobs, type TokenLogprobs } from "./target-logprobs.js";

type CustomGradFn = Parameters<typeof tf.customGrad>[0];

export { targetLogprobs, type TokenLogprobs } from "./target-logprobs.js";

/**
 * Log-probabilities [B, T-1-from] of tokens from+1..T-1 of the equal-length rows `ids` given their
 * prefixes (column j scores ids[b][from + j + 1]), and optionally entropies. `from` (default 0) skips
 * prompt positions nobody scores; the last position's logits are never computed.
 */
export function sequenceLogprobs(lm: TrainableLM, ids: number[][], opts: { temperature?: number; reference?: boolean; entropy?: boolean; from?: number } = {}): TokenLogprobs {
  const t = ids[0].length;
  const from = opts.from ?? 0;
  if (t < 2 || ids.some((r) => r.length !== t)) throw new Error("sequenceLogprobs needs equal-length rows of at least 2 ids");
  if (!(from >= 0 && from <= t - 2)) throw new Error(`from must be in [0, ${t - 2}], got ${from}`);
  const chunk = lm.hidden && lm.logitChunk ? lm.logitChunk() : 0;
  const inputs = ids.map((r) => r.slice(0, -1));
  if (chunk > 0) {
    const { hidden, head } = lm.hidden!(inputs, { reference: opts.reference, from });
    return chunkedTargetLogprobs(hidden, head, ids.map((r) => r.slice(from + 1)), chunk, opts.temperature ?? 1, opts.entropy ?? false);
  }
  const targets = tf.tensor2d(ids.map((r) => r.slice(from + 1)), [ids.length, t - 1 - from], "int32");
  const logits = lm.logits(inputs, { reference: opts.reference, from });
  return targetLogprobs(logits, targets, opts.temperature ?? 1, opts.entropy ?? false);
}

/**
 * Values one scored position of a micro-batch holds whole in the learner: the vocabulary's logits, or the
 * hidden state when the LM projects positions onto the vocabulary in chunks (then only a chunk's logits
 * exist at a time). planMicroBatches caps a micro-batch by it.
 */
export function scoredWidth(lm: TrainableLM): number {
  return lm.hidden && lm.logitChunk && lm.logitChunk() > 0 && lm.hiddenSize ? lm.hiddenSize : lm.vocabSize;
}

/** Stops gradients: the value of x, with zero gradient (tfjs has no stop_gradient op). */
export const stopGradient: (x: tf.Tensor) => tf.Tensor = tf.customGrad(((x: tf.Tensor) => ({
  value: tf.clone(x),
  gradFunc: (dy: tf.Tensor) => tf.zerosLike(dy),
})) as unknown as CustomGradFn) as (x: tf.Tensor) => tf.Tensor;
