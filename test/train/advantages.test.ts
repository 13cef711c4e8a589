import { test } from "node:test";
import assert from "node:assert/strict";
import { groupAdvantages } from "../../lib/train/advantages.js";

const close = (a: number[], b: number[], tol = 1e-9) => a.forEach((x, i) => assert.ok(Math.abs(x - b[i]) <= tol, `[${i}] ${x} vs ${b[i]}`));

test("group scale divides by the group's sample std (n - 1) plus eps", () => {
  // group [1, 0, 0, 1]: mean 0.5, sample std sqrt(1/3); group [1, 1, 1, 0]: mean 0.75, std 0.5
  const r = groupAdvantages([1, 0, 0, 1, 1, 1, 1, 0], 4, "group", 1e-4);
  const s1 = Math.sqrt(1 / 3) + 1e-4;
  close(r.advantages, [0.5 / s1, -0.5 / s1, -0.5 / s1, 0.5 / s1, 0.25 / 0.5001, 0.25 / 0.5001, 0.25 / 0.5001, -0.75 / 0.5001]);
  close(r.groupMean, [0.5, 0.5, 0.5, 0.5, 0.75, 0.75, 0.75, 0.75]);
  assert.equal(r.fracZeroStd, 0);
});

test("batch scale keeps group means but divides by the batch std", () => {
  const rewards = [1, 0, 2, 2];
  const r = groupAdvantages(rewards, 2, "batch", 0);
  // batch mean 1.25, sample std sqrt(((0.25)^2 + 1.25^2 + 0.75^2 * 2) / 3)
  const std = Math.sqrt((0.0625 + 1.5625 + 0.5625 * 2) / 3);
  close(r.advantages, [0.5 / std, -0.5 / std, 0, 0]);
  assert.ok(Math.abs(r.rewardStd - std) < 1e-12);
  assert.equal(r.fracZeroStd, 0, "batch std is not zero, so no sample counts as zero-std under batch scaling");
});

test("none only centres by the group mean (Dr. GRPO)", () => {
  const r = groupAdvantages([3, 1, 5, 5], 2, "none");
  close(r.advantages, [1, -1, 0, 0]);
  assert.equal(r.fracZeroStd, 0.5);
});

test("zero-variance groups get zero advantage and count in frac_reward_zero_std", () => {
  const r = groupAdvantages([1, 1, 1, 0, 0, 0], 3, "group");
  close(r.advantages, [0, 0, 0, 0, 0, 0]);
  assert.equal(r.fracZeroStd, 1);
  assert.equal(r.rewardMean, 0.5);
});

test("NaN rewards are left out of the statistics and get advantage 0", () => {
  const r = groupAdvantages([1, NaN, 0], 3, "none");
  close(r.advantages, [0.5, 0, -0.5]);
});

test("rewards that do not split into groups are rejected", () => {
  assert.throws(() => groupAdvantages([1, 2, 3], 2), /groups of 2/);
});
