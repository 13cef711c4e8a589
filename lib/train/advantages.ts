/**
 * Group-relative advantages (GRPO). Rewards arrive flat, groups contiguous: [p0s0, p0s1, ..., p1s0, ...].
 *
 * Standard deviations are the sample std (divide by n - 1), as TRL (`nanstd`) and verl (`torch.std`) use;
 * eps is added to the std (TRL: 1e-4). A NaN reward (grading gave nothing) is left out of the group
 * statistics and gets advantage 0. A group of one sample has std 0 and advantage 0.
 */
import { defaultOf } from "./settings.js";

export type AdvantageScale = "group" | "batch" | "none";

export interface AdvantageResult {
  advantages: number[];
  /** Per sample: the mean reward of its group. */
  groupMean: number[];
  /** Per sample: the std of its group's rewards. */
  groupStd: number[];
  /** Fraction of samples whose group has (near) zero reward std: no learning signal there. */
  fracZeroStd: number;
  /** Mean and sample std of all (non-NaN) rewards of the batch. */
  rewardMean: number;
  rewardStd: number;
}

function meanStd(xs: number[]): { mean: number; std: number; n: number } {
  const v = xs.filter((x) => !Number.isNaN(x));
  const n = v.length;
  if (n === 0) return { mean: NaN, std: NaN, n };
  const mean = v.reduce((a, b) => a + b, 0) / n;
  if (n < 2) return { mean, std: 0, n };
  const ss = v.reduce((a, b) => a + (b - mean) * (b - mean), 0);
  return { mean, std: Math.sqrt(ss / (n - 1)), n };
}

/** Near-zero test matching torch.isclose(std, 0) defaults (atol 1e-8). */
const isZero = (x: number) => Math.abs(x) <= 1e-8;

/** Returns per-sample advantages for contiguous groups of `groupSize` rewards, scaled as `scale` says. */
export function groupAdvantages(rewards: number[], groupSize: number, scale: AdvantageScale = defaultOf("scale_rewards", "grpo") as AdvantageScale, eps = 1e-4): AdvantageResult {
  if (!Number.isInteger(groupSize) || groupSize < 1) throw new RangeError(`groupSize must be a positive integer, got ${groupSize}`);
  if (rewards.length % groupSize !== 0) throw new RangeError(`${rewards.length} rewards do not split into groups of ${groupSize}`);
  const batch = meanStd(rewards);
  const advantages: number[] = [];
  const groupMean: number[] = [];
  const groupStd: number[] = [];
  let zero = 0;
  for (let g = 0; g < rewards.length; g += groupSize) {
    const group = rewards.slice(g, g + groupSize);
    const { mean, std } = meanStd(group);
    const denom = scale === "group" ? std + eps : scale === "batch" ? batch.std + eps : 1;
    const zeroStd = isZero(scale === "batch" ? batch.std : std) || Number.isNaN(std);
    for (const r of group) {
      advantages.push(Number.isNaN(r) || Number.isNaN(mean) ? 0 : (r - mean) / denom);
      groupMean.push(mean);
      groupStd.push(std);
      if (zeroStd) zero++;
    }
  }
  return { advantages, groupMean, groupStd, fracZeroStd: rewards.length ? zero / rewards.length : 0, rewardMean: batch.mean, rewardStd: batch.std };
}
