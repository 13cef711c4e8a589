import { test } from "node:test";
import assert from "node:assert/strict";
import { computeReward } from "../../lib/verifier/rewards.js";
import type { Outcome } from "../../lib/verifier/types.js";

const all: Outcome[] = ["correct", "wrong_rows", "sql_error", "timeout", "unsafe", "too_large", "no_sql", "truncated"];

test("binary: 1 only when correct", () => {
  assert.deepEqual(all.map((outcome) => computeReward("binary", { outcome })), [1, 0, 0, 0, 0, 0, 0, 0]);
});

test("shaped: 1 correct, 0.1 ran but wrong, 0 otherwise", () => {
  assert.deepEqual(all.map((outcome) => computeReward("shaped", { outcome })), [1, 0.1, 0, 0, 0, 0.1, 0, 0]);
});

test("tool-rl: 1 / 0 / -1 by outcome", () => {
  assert.deepEqual(all.map((outcome) => computeReward("tool-rl", { outcome })), [1, 0, 0, 0, -1, 0, -1, -1]);
});

test("tool-rl: 0.05 per invalid tool call, capped at 0.2; evidence rules 0.1 each", () => {
  assert.equal(computeReward("tool-rl", { outcome: "correct", invalidToolCalls: 3 }), 0.85);
  assert.equal(computeReward("tool-rl", { outcome: "correct", invalidToolCalls: 4 }), 0.8);
  assert.equal(computeReward("tool-rl", { outcome: "correct", invalidToolCalls: 9 }), 0.8);
  assert.equal(computeReward("tool-rl", { outcome: "no_sql", invalidToolCalls: 9 }), -1.2);
  assert.equal(computeReward("tool-rl", { outcome: "correct", skippedEvidenceRules: 2 }), 0.8);
  assert.equal(computeReward("tool-rl", { outcome: "wrong_rows", invalidToolCalls: 1, skippedEvidenceRules: 1 }), -0.15);
  assert.equal(computeReward("shaped", { outcome: "correct", invalidToolCalls: 3 }), 1, "penalties are tool-rl only");
});

test("unknown presets and outcomes are errors", () => {
  assert.throws(() => computeReward("nope" as never, { outcome: "correct" }), /unknown reward preset/);
  assert.throws(() => computeReward("binary", { outcome: "nope" as never }), /unknown outcome/);
});
