/**
 * Per-token log-probabilities of given tokens under a model, and the entropy of its next-token
 * distribution. The log-prob gets a hand-written gradient (softmax minus one-hot) so the backward pass
 * holds one [B, T, V] tensor instead of the chain of a log-softmax; an LM that gives its hidden states is
 * scored a chunk of positions at a time (chunked-logprobs.ts), so not even that one exists whole.
 */
import { tf } from "../backend/tf.js";
import type { TrainableLM } from "./lm.js";
import { fusedKernelsActive } from "../backend/webgpu/train/fused.js";
import { fusedTargetLogprobs } from "../backend/webgpu/train/logprob-kernels.js";
import { chunkedTargetLogprobs } from "./chunked-logprobs.js";

type CustomGradFn = Parameters<typeof tf.customGrad>[0];

export interface TokenLogprobs {
  /** [B, T] log p(target_t) of the temperature-scaled distribution. */
  logp: tf.Tensor2D;
  /** [B, T] entropy of that distribution (no gradient), when asked for. */
  entropy?: tf.Tensor2D;
}

/**
 * Log-probabilities of `targets` [B, T] (int32) under `logits` [B, T, V] divided by `temperature`
 * (TRL divides by the sampling temperature too), and optionally the entropies. On WebGPU the fused
 * kernels of lib/backend/webgpu/train/logprob-kernels.ts compute the same (unless T2S_FUSED_KERNELS=0).
 */
export function targetLogprobs(logits: tf.Tensor3D, targets: tf.Tensor2D, temperature = 1, withEntropy = false): TokenLogprobs {
  if (fusedKernelsActive()) return fusedTargetLogprobs(logits, targets, temperature, withEntropy);
  const vocab = logits.shape[2];
  let entropy: tf.Tensor2D | undefined;
  // targets go in as an input (with a zero gradient) so the tape keeps them alive for the backward pass
  const op = tf.customGrad(((z: tf.Tensor, tgt: tf.Tensor, save: tf.GradSaveFunc) => {
    const scaled = temperature === 1 ? z : tf.div(z, temperature);
    const lse = tf.logSumExp(scaled, -1, true);
    const logProbs = tf.sub(scaled, lse);
    const probs = tf.exp(logProbs);
    const oneHot = tf.oneHot(tgt as tf.Tensor2D, vocab);
    const value = tf.sum(tf.mul(logProbs, oneHot), -1);
    if (withEntropy) entropy = tf.keep(tf.neg(tf.sum(tf.mul(probs, logProbs), -1)) as tf.Tensor2D);
    save([probs, tgt]);
    return {
      value,
      gradFunc: (dy: tf.Tensor, saved: tf.Tensor[]) => {
        const [p, t] = saved;
        const g = tf.mul(tf.expandDims(dy, -1), tf.sub(tf.oneHot(t as tf.Tensor2D, vocab), p));
        return [temperature === 1 ? g : tf.div(g, temperature), tf.zerosLike(t)];
      },
    };
  }) as unknown as CustomGradFn);
  const logp = op(logits, targets) as tf.Tensor2D;
  return { logp, entropy };
}

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
