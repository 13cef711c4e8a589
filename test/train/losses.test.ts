import { test } from "node:test";
import assert from "node:assert/strict";
import * as tf from "@tensorflow/tfjs-core";
import { assertClose, finiteDiff, TinyLM, useCpu } from "./tiny-lm.js";
import { aggregateLoss, perTokenLoss, policyLoss, type LossSettings, type LossType, type StepCounts } from "../../lib/train/losses.js";
import { sequenceLogprobs } from "../../lib/train/logprobs.js";

await useCpu();

// Two sequences, three completion positions; the last token of row 0 is masked out.
const LOGP = [[-1, -2, -0.5], [-0.3, -1.2, -2]];
const OLD = [[-1.1, -1.5, -0.5], [-0.3, -1.0, -2.5]];
const ADV = [1, -1];
const MASK = [[1, 1, 0], [1, 1, 1]];

function lossOf(type: LossType, counts: Partial<StepCounts> = {}, s: Partial<LossSettings> = {}): number {
  return tf.tidy(() => {
    const settings: LossSettings = { lossType: type, epsilonLow: 0.2, epsilonHigh: type === "cispo" ? 1.2 : 0.28, beta: 0, ...s };
    const c: StepCounts = { sequences: 2, tokens: 5, microBatches: 1, maxCompletionLength: 4, ...counts };
    const inp = { logp: tf.tensor2d(LOGP), oldLogp: tf.tensor2d(OLD), advantages: tf.tensor1d(ADV), mask: tf.tensor2d(MASK), refLogp: tf.tensor2d(OLD) };
    return aggregateLoss(perTokenLoss(inp, settings).loss, inp.mask, type, c).dataSync()[0];
  });
}

// Per-token clipped losses by hand: ratios e^0.1, e^-0.5 (A=+1: min picks the unclipped e^-0.5 < 0.8);
// 1, e^-0.2, e^0.5 (A=-1: min picks the unclipped -e^0.5 < -1.28).
const row0 = [-Math.exp(0.1), -Math.exp(-0.5)];
const row1 = [1, Math.exp(-0.2), Math.exp(0.5)];
const tokenSum = row0[0] + row0[1] + row1[0] + row1[1] + row1[2];

test("grpo: token mean per sequence, then mean over the step's sequences", () => {
  const want = ((row0[0] + row0[1]) / 2 + (row1[0] + row1[1] + row1[2]) / 3) / 2;
  assertClose(lossOf("grpo"), want, 1e-6, 1e-5, "grpo");
  assertClose(lossOf("grpo"), 0.1499847, 1e-6, 1e-5, "grpo literal");
  assertClose(lossOf("grpo", { sequences: 4 }), want / 2, 1e-6, 1e-5, "grpo over a step of 4 sequences");
});

test("bnpo: token mean over the micro-batch, divided by the accumulation steps", () => {
  assertClose(lossOf("bnpo"), tokenSum / 5, 1e-6, 1e-5, "bnpo");
  assertClose(lossOf("bnpo", { microBatches: 2, tokens: 99 }), tokenSum / 5 / 2, 1e-6, 1e-5, "bnpo ignores the step's token count");
});

test("dr_grpo: token sum over (sequences x max completion length)", () => {
  assertClose(lossOf("dr_grpo"), tokenSum / 8, 1e-6, 1e-5, "dr_grpo");
  assertClose(lossOf("dr_grpo", { sequences: 4, maxCompletionLength: 10 }), tokenSum / 40, 1e-6, 1e-5, "dr_grpo step");
});

test("dapo: token sum over the tokens of the whole step", () => {
  assertClose(lossOf("dapo"), tokenSum / 5, 1e-6, 1e-5, "dapo");
  assertClose(lossOf("dapo", { tokens: 12, microBatches: 3 }), tokenSum / 12, 1e-6, 1e-5, "dapo across micro-batches");
});

test("cispo: capped importance weight times A times log-prob, token-normalised", () => {
  const w = [[Math.exp(0.1), Math.exp(-0.5)], [1, Math.exp(-0.2), 1.2]];
  const sum = -(w[0][0] * -1 + w[0][1] * -2) + (w[1][0] * -0.3 + w[1][1] * -1.2 + w[1][2] * -2);
  assertClose(lossOf("cispo"), sum / 5, 1e-6, 1e-5, "cispo");
});

test("k3 KL is added per token with coefficient beta", () => {
  // reference = OLD here, so d = old - logp per token
  let kl = 0;
  for (let i = 0; i < 2; i++) for (let t = 0; t < 3; t++) if (MASK[i][t]) { const d = OLD[i][t] - LOGP[i][t]; kl += Math.exp(d) - d - 1; }
  assertClose(lossOf("dapo", {}, { beta: 0.5 }), (tokenSum + 0.5 * kl) / 5, 1e-6, 1e-5, "dapo + kl");
});

test("clip metrics count low (ratio < 1 - eps, A < 0) and high (ratio > 1 + eps, A > 0) tokens", () => {
  const { lo, hi, reg, n } = tf.tidy(() => {
    const inp = {
      logp: tf.tensor2d([[0, 0, 0], [0, 0, 0]]),
      oldLogp: tf.tensor2d([[-0.5, 0, 0.5], [-0.5, 0.5, 0.5]]),
      advantages: tf.tensor1d([1, -1]),
      mask: tf.tensor2d([[1, 1, 1], [1, 1, 0]]),
    };
    const { loss, sums } = policyLoss(inp, { lossType: "grpo", epsilonLow: 0.2, epsilonHigh: 0.2, beta: 0 }, { sequences: 2, tokens: 5, microBatches: 1, maxCompletionLength: 3 });
    loss.dispose();
    // row 0 (A>0): ratios e^.5 (high), 1, e^-.5 (not counted: A>0); row 1 (A<0): e^.5, e^-.5 (low), masked
    return { lo: sums.clipLow.dataSync()[0], hi: sums.clipHigh.dataSync()[0], reg: sums.clipRegion.dataSync()[0], n: sums.tokens.dataSync()[0] };
  });
  assert.deepEqual([lo, hi, reg, n], [1, 1, 2, 5]);
});

test("masked tokens (e.g. a masked truncated row) contribute nothing to loss or gradient", () => {
  const a = lossOf("dapo");
  const saved = MASK[1].slice();
  MASK[1] = [0, 0, 0];
  const b = lossOf("dapo", { tokens: 2 });
  MASK[1] = saved;
  assertClose(b, (row0[0] + row0[1]) / 2, 1e-6, 1e-5, "masked row");
  assert.notEqual(a, b);
});

// Gradients of each loss type on the tiny model against central finite differences.
const IDS = [[1, 3, 2, 5, 0], [4, 2, 2, 1, 6]];
const GMASK = tf.tensor2d([[0, 1, 1, 1], [0, 1, 1, 0]]);
const ADVT = tf.tensor1d([0.7, -1.3]);
// old log-probs sit away from the clip boundaries: some tokens inside [1-eps, 1+eps], some clipped
const SHIFT = tf.tensor2d([[0, 0.05, -0.4, 0.4], [0, -0.05, 0.4, -0.4]]);

for (const type of ["grpo", "bnpo", "dr_grpo", "dapo", "cispo"] as const) {
  test(`gradient of ${type} (with KL) matches finite differences`, () => {
    const lm = new TinyLM({ vocab: 7, dim: 3, maxLen: 8, seed: 11 });
    const settings: LossSettings = { lossType: type, epsilonLow: 0.2, epsilonHigh: type === "cispo" ? 1.1 : 0.28, beta: 0.05 };
    const counts: StepCounts = { sequences: 3, tokens: 7, microBatches: 2, maxCompletionLength: 6 };
    const start = sequenceLogprobs(lm, IDS);
    const old = tf.keep(tf.sub(start.logp, SHIFT)) as tf.Tensor2D;
    start.logp.dispose();
    const ref = tf.keep(sequenceLogprobs(lm, IDS, { reference: true }).logp);
    // cispo's weight is a stop-gradient: its finite-difference target holds the weight at the base point
    const weight = tf.keep(tf.minimum(tf.exp(SHIFT), settings.epsilonHigh));
    const loss = (): tf.Scalar => {
      const logp = sequenceLogprobs(lm, IDS).logp;
      if (type === "cispo") {
        const d = tf.sub(ref, logp);
        const kl = tf.sub(tf.sub(tf.exp(d), d), 1);
        const tok = tf.add(tf.neg(tf.mul(tf.mul(weight, tf.expandDims(ADVT, 1)), logp)), tf.mul(kl, settings.beta));
        return tf.div(tf.sum(tf.mul(tok, GMASK)), counts.tokens) as tf.Scalar;
      }
      return policyLossOnly(logp);
    };
    const policyLossOnly = (logp: tf.Tensor2D) => {
      const r = policyLoss({ logp, oldLogp: old, refLogp: ref, advantages: ADVT, mask: GMASK }, settings, counts);
      for (const v of Object.values(r.sums)) v.dispose();
      return r.loss;
    };
    const vars = lm.trainableParams().map((p) => p.variable);
    const { grads } = tf.variableGrads(() => policyLossOnly(sequenceLogprobs(lm, IDS).logp), vars);
    const value = () => tf.tidy(() => loss().dataSync()[0]);
    let checked = 0;
    for (const v of vars) {
      const g = grads[v.name].dataSync();
      for (let i = 0; i < v.size; i += 3) {
        assertClose(g[i], finiteDiff(value, v, i, 5e-3), 3e-4, 2e-2, `${type} d/d${v.name}[${i}]`);
        checked++;
      }
    }
    assert.ok(checked > 20);
    const nonzero = Object.values(grads).some((g) => Array.from(g.dataSync()).some((x) => Math.abs(x) > 1e-4));
    assert.ok(nonzero, "gradient is not identically zero");
    tf.dispose([old, ref, weight, ...Object.values(grads)]);
    lm.dispose();
  });
}
