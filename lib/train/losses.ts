/**
 * GRPO-family policy losses on one micro-batch: per-token objective, KL penalty, and the normalisation of
 * each loss type. See docs/training.md for the formulas.
 *
 * Normalisation across the micro-batches of one optimizer step (the gradients are summed over them):
 *   grpo    sum over sequences of (token mean of the sequence) / sequences in the step
 *   bnpo    token sum / tokens of this micro-batch, divided by the number of micro-batches (as TRL)
 *   dr_grpo token sum / (sequences in the step x max completion length)
 *   dapo    token sum / tokens in the whole step
 *   cispo   token sum / tokens in the whole step
 * With equal-sized micro-batches grpo and dr_grpo equal TRL's per-micro-batch mean divided by the number
 * of accumulation steps; unlike TRL they also stay exact when the last micro-batch is smaller.
 */
import { tf } from "../backend/tf.js";
import { stopGradient } from "./logprobs.js";
import { importanceWeights, mismatchSums, type MismatchSums, type RolloutCorrection, type RolloutLogprobs } from "./rollout-correction.js";

export const LOSS_TYPES = ["grpo", "bnpo", "dr_grpo", "dapo", "cispo"] as const;
export type LossType = (typeof LOSS_TYPES)[number];

export interface LossSettings {
  lossType: LossType;
  /** Lower clip: ratio >= 1 - epsilonLow (unused by cispo). */
  epsilonLow: number;
  /** Upper clip: ratio <= 1 + epsilonHigh; for cispo (TRL convention) the absolute cap on the IS weight. */
  epsilonHigh: number;
  /** KL coefficient (k3 estimator against the reference); 0 turns it off. */
  beta: number;
  /**
   * Importance correction for the rollout/learner mismatch (TIS); absent or null = off. It needs the
   * sampler's log-probs (`LossInputs.rollout`); tokens without one keep weight 1.
   */
  rolloutCorrection?: RolloutCorrection | null;
}

/** Counts over the whole optimizer step that the normalisers need. */
export interface StepCounts {
  /** Sequences in the step (all micro-batches), masked-out ones included. */
  sequences: number;
  /** Active (mask = 1) completion tokens in the step. */
  tokens: number;
  /** Number of micro-batches the step is split into. */
  microBatches: number;
  /** The configured maximum completion length (dr_grpo's constant). */
  maxCompletionLength: number;
}

export interface LossInputs {
  /** [B, T] current log-probs (differentiable). */
  logp: tf.Tensor2D;
  /** [B, T] log-probs of the policy that sampled (constant); null = on-policy (ratio 1, detached logp). */
  oldLogp: tf.Tensor2D | null;
  /** [B, T] reference log-probs (constant); required when beta > 0. */
  refLogp?: tf.Tensor2D;
  /** [B] one advantage per sequence. */
  advantages: tf.Tensor1D;
  /** [B, T] 1 for tokens in the loss, 0 elsewhere (prompt, padding, tool output, masked truncation). */
  mask: tf.Tensor2D;
  /** The sampler's log-probs of the same tokens, when it reported them (constant). */
  rollout?: RolloutLogprobs | null;
}

/**
 * Sums over the micro-batch's active tokens, for the step's metrics (divide by `tokens`), and with the
 * sampler's log-probs the rollout/learner mismatch sums (rollout-correction.ts: Max / Min keys combine
 * across micro-batches by max / min).
 */
export interface LossSums extends Partial<MismatchSums> {
  tokens: tf.Scalar;
  clipLow: tf.Scalar;
  clipHigh: tf.Scalar;
  clipRegion: tf.Scalar;
  kl: tf.Scalar;
}

/** The learner's log-probs before this step's update: the given old ones, or (on-policy) the detached current ones. */
function oldLogprobs(inp: LossInputs): tf.Tensor2D {
  return inp.oldLogp ?? (stopGradient(inp.logp) as tf.Tensor2D);
}

/**
 * Returns [B, T] per-token losses (before masking), ratios / KL for metrics, and the importance weights
 * of the rollout correction (null when it is off or there are no sampler log-probs).
 */
export function perTokenLoss(inp: LossInputs, s: LossSettings): { loss: tf.Tensor2D; ratio: tf.Tensor2D; kl: tf.Tensor2D | null; isWeight: tf.Tensor2D | null } {
  const old = oldLogprobs(inp);
  const ratio = tf.exp(tf.sub(inp.logp, old)) as tf.Tensor2D;
  const adv = tf.expandDims(inp.advantages, 1);
  let loss: tf.Tensor;
  if (s.lossType === "cispo") {
    const weight = stopGradient(tf.minimum(ratio, s.epsilonHigh));
    loss = tf.neg(tf.mul(tf.mul(weight, adv), inp.logp));
  } else {
    const unclipped = tf.mul(ratio, adv);
    const clipped = tf.mul(tf.clipByValue(ratio, 1 - s.epsilonLow, 1 + s.epsilonHigh), adv);
    loss = tf.neg(tf.minimum(unclipped, clipped));
  }
  // the rollout correction weights the policy-gradient term only, not the KL penalty (as TRL)
  const isWeight = s.rolloutCorrection && inp.rollout ? importanceWeights(old, inp.rollout, s.rolloutCorrection) : null;
  if (isWeight) loss = tf.mul(loss, isWeight);
  let kl: tf.Tensor2D | null = null;
  if (s.beta !== 0) {
    if (!inp.refLogp) throw new Error("beta > 0 needs reference log-probs");
    const d = tf.sub(inp.refLogp, inp.logp);
    kl = tf.sub(tf.sub(tf.exp(d), d), 1) as tf.Tensor2D;
    loss = tf.add(loss, tf.mul(kl, s.beta));
  }
  return { loss: loss as tf.Tensor2D, ratio, kl, isWeight };
}

/** Reduces masked per-token losses of one micro-batch to the scalar whose gradients are summed over the step. */
export function aggregateLoss(loss: tf.Tensor2D, mask: tf.Tensor2D, lossType: LossType, c: StepCounts): tf.Scalar {
  const masked = tf.mul(loss, mask);
  switch (lossType) {
    case "grpo": {
      const perSeq = tf.div(tf.sum(masked, 1), tf.maximum(tf.sum(mask, 1), 1));
      return tf.div(tf.sum(perSeq), Math.max(1, c.sequences));
    }
    case "bnpo":
      return tf.div(tf.div(tf.sum(masked), tf.maximum(tf.sum(mask), 1)), Math.max(1, c.microBatches));
    case "dr_grpo":
      return tf.div(tf.sum(masked), Math.max(1, c.sequences * c.maxCompletionLength));
    case "dapo":
    case "cispo":
      return tf.div(tf.sum(masked), Math.max(1, c.tokens));
  }
}

/** The micro-batch loss scalar and metric sums (kept tensors the caller disposes). */
export function policyLoss(inp: LossInputs, s: LossSettings, c: StepCounts): { loss: tf.Scalar; sums: LossSums } {
  const { loss, ratio, kl } = perTokenLoss(inp, s);
  const total = aggregateLoss(loss, inp.mask, s.lossType, c);
  const sums: LossSums = tf.tidy(() => {
    const r = stopGradient(ratio);
    const adv = tf.expandDims(inp.advantages, 1);
    const on = (b: tf.Tensor) => tf.sum(tf.mul(tf.cast(b, "float32"), inp.mask)) as tf.Scalar;
    const negA = tf.less(adv, 0);
    const posA = tf.greater(adv, 0);
    const low = s.lossType === "cispo" ? tf.cast(tf.zerosLike(r), "bool") : tf.logicalAnd(tf.less(r, 1 - s.epsilonLow), negA);
    const high = s.lossType === "cispo" ? tf.logicalAnd(tf.greater(r, s.epsilonHigh), posA) : tf.logicalAnd(tf.greater(r, 1 + s.epsilonHigh), posA);
    return {
      tokens: tf.sum(inp.mask) as tf.Scalar,
      clipLow: on(low),
      clipHigh: on(high),
      clipRegion: on(tf.logicalOr(low, high)),
      kl: kl ? (tf.sum(tf.mul(stopGradient(kl), inp.mask)) as tf.Scalar) : tf.scalar(0),
      ...(inp.rollout ? mismatchSums(oldLogprobs(inp), inp.rollout, inp.mask, s.rolloutCorrection ?? null) : {}),
    };
  });
  for (const v of Object.values(sums)) tf.keep(v as tf.Scalar);
  return { loss: total, sums };
}

/** Active-token count of each row that a mask leaves in the loss, and the step counts for a set of masks. */
export function stepCounts(masks: number[][][], maxCompletionLength: number): StepCounts {
  let sequences = 0;
  let tokens = 0;
  for (const mb of masks) {
    sequences += mb.length;
    for (const row of mb) for (const m of row) tokens += m;
  }
  return { sequences, tokens, microBatches: masks.length, maxCompletionLength };
}
