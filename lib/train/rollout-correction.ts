/**
 * The correction for the rollout/learner mismatch. The sampler that draws a step's tokens and the learner
 * that scores them compute the same policy in different ways (the step kernels against the training
 * graph, int8 rollout weights against fp32 ones), so the tokens come from a slightly different policy
 * than the one the loss assumes. Truncated importance sampling (TIS) weights each token's policy-gradient
 * loss by w = min(exp(old_logp - rollout_logp), cap), detached, where old_logp is the learner's log-prob
 * before this step's update and rollout_logp the sampler's. This module computes those weights and the
 * figures of the mismatch the train log shows (docs/training.md, "Rollout/learner mismatch").
 */
import { tf } from "../backend/tf.js";
import { stopGradient } from "./logprobs.js";

/**
 * How the ratio becomes a weight (TRL's `vllm_importance_sampling_mode` values): `token_truncate` caps it
 * (TIS), `token_mask` keeps it up to the cap and drops tokens above (weight 0).
 */
export const IMPORTANCE_SAMPLING_MODES = ["token_truncate", "token_mask"] as const;
export type ImportanceSamplingMode = (typeof IMPORTANCE_SAMPLING_MODES)[number];

export interface RolloutCorrection {
  mode: ImportanceSamplingMode;
  /** The ratio above which a token is truncated (token_truncate) or dropped (token_mask). */
  cap: number;
}

/** The sampler's log-probs of the tokens of a micro-batch, aligned with its loss mask. */
export interface RolloutLogprobs {
  /**
   * [B, T] the sampler's log-prob of each token: log softmax(logits / T) before any top-k / top-p cut, the
   * quantity the learner computes (any value where unknown).
   */
  logp: tf.Tensor2D;
  /** [B, T] 1 where the sampler reported a finite log-prob, 0 elsewhere. */
  known: tf.Tensor2D;
}

/**
 * The [B, T] importance weights (no gradient) of the policy-gradient loss: where the sampler's log-prob is
 * known, the ratio exp(old - rollout) capped or masked by `c`; 1 where it is not (so a missing log-prob
 * leaves the token as it was and never makes a NaN). `old` is the learner's log-prob before the update.
 */
export function importanceWeights(old: tf.Tensor2D, rollout: RolloutLogprobs, c: RolloutCorrection): tf.Tensor2D {
  return tf.tidy(() => {
    const known = tf.greater(rollout.known, 0);
    // unknown entries may hold anything (even NaN): replace them before the arithmetic, not after
    const logRatio = tf.where(known, tf.sub(stopGradient(old), rollout.logp), tf.zerosLike(old));
    const ratio = tf.exp(logRatio);
    const w = c.mode === "token_truncate" ? tf.minimum(ratio, c.cap) : tf.where(tf.greater(ratio, c.cap), tf.zerosLike(ratio), ratio);
    return stopGradient(w) as tf.Tensor2D;
  });
}

/**
 * Sums over one micro-batch's compared tokens (in the loss and with a known sampler log-prob) for the
 * step's mismatch figures. Keys ending in Max / Min combine across micro-batches by max / min, the
 * others by sum (the caller divides by `isTokens`).
 */
export type MismatchSums = {
  isTokens: tf.Scalar;
  isRatioSum: tf.Scalar;
  isRatioMax: tf.Scalar;
  isRatioMin: tf.Scalar;
  /** Tokens whose ratio exceeds the cap (present only with a correction). */
  isCapped?: tf.Scalar;
  /** Σ (rollout - old): the direct estimate of KL(rollout || learner) per token. */
  rolloutKlSum: tf.Scalar;
  /** Σ (ρ - log ρ - 1) with ρ = exp(old - rollout): the k3 estimate of the same KL. */
  rolloutK3Sum: tf.Scalar;
  /** Σ |old - rollout| and its max. */
  logpDiffSum: tf.Scalar;
  logpDiffMax: tf.Scalar;
};

/** The mismatch sums of one micro-batch (tensors the caller disposes); `mask` is the loss mask. */
export function mismatchSums(old: tf.Tensor2D, rollout: RolloutLogprobs, mask: tf.Tensor2D, correction: RolloutCorrection | null): MismatchSums {
  return tf.tidy(() => {
    const on = tf.logicalAnd(tf.greater(rollout.known, 0), tf.greater(mask, 0));
    const zeros = tf.zerosLike(old);
    // every quantity is selected with `on` before it is summed: an entry outside it may be ±Inf or NaN
    const d = tf.where(on, tf.sub(stopGradient(old), rollout.logp), zeros);
    const ratio = tf.exp(d);
    const sum = (x: tf.Tensor) => tf.sum(tf.where(on, x, zeros)) as tf.Scalar;
    const sums: MismatchSums = {
      isTokens: tf.sum(tf.cast(on, "float32")) as tf.Scalar,
      isRatioSum: sum(ratio),
      isRatioMax: tf.max(tf.where(on, ratio, zeros)) as tf.Scalar,
      // a finite stand-in for +Inf outside `on` (a micro-batch without compared tokens has isTokens 0)
      isRatioMin: tf.min(tf.where(on, ratio, tf.fill(old.shape, 3e38))) as tf.Scalar,
      rolloutKlSum: sum(tf.neg(d)),
      // expm1 keeps the k3 of tiny gaps (~d^2 / 2) above float32's rounding of exp(d) - 1
      rolloutK3Sum: sum(tf.sub(tf.expm1(d), d)),
      logpDiffSum: sum(tf.abs(d)),
      logpDiffMax: tf.max(tf.abs(d)) as tf.Scalar,
    };
    if (correction) sums.isCapped = sum(tf.cast(tf.greater(ratio, correction.cap), "float32"));
    return sums;
  });
}

/**
 * The train log's mismatch figures from a step's combined sums (first pass); empty when no token had a
 * sampler log-prob. Names follow TRL / ms-swift where they have one (docs/training.md lists them).
 */
export function mismatchMetrics(s: Record<string, number>): Record<string, number> {
  const n = s.isTokens ?? 0;
  if (!(n > 0)) return {};
  const out: Record<string, number> = {
    sampling_logp_diff_mean: s.logpDiffSum / n,
    sampling_logp_diff_max: s.logpDiffMax,
    is_ratio_mean: s.isRatioSum / n,
    is_ratio_min: s.isRatioMin,
    is_ratio_max: s.isRatioMax,
    rollout_kl: s.rolloutKlSum / n,
    rollout_kl_k3: s.rolloutK3Sum / n,
  };
  if (s.isCapped !== undefined) out.is_clipped_frac = s.isCapped / n;
  return out;
}
