/**
 * Log-probabilities of target tokens under given logits, and the entropies of those distributions. The
 * log-prob gets a hand-written gradient (softmax minus one-hot) so the backward pass holds one [B, T, V]
 * tensor instead of the chain of a log-softmax; on WebGPU one fused kernel each way.
 */
import { tf } from "../backend/tf.js";
import { fusedKernelsActive } from "../backend/webgpu/train/fused.js";
import { fusedTargetLogprobs } from "../backend/webgpu/train/logprob-kernels.js";

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
