import { test } from "node:test";
import assert from "node:assert/strict";
import * as tf from "@tensorflow/tfjs-core";
import { assertClose, finiteDiff, TinyLM, useCpu } from "./tiny-lm.js";
import { perTokenLoss, policyLoss, type LossSettings, type StepCounts } from "../../lib/train/losses.js";
import { sequenceLogprobs } from "../../lib/train/logprobs.js";
import { batchTensors } from "../../lib/train/batching.js";
import { mismatchMetrics, type ImportanceSamplingMode } from "../../lib/train/rollout-correction.js";

await useCpu();

// Two rows, three completion positions; row 0's last token is out of the loss. The learner's old
// log-probs and the sampler's differ by d = old - rollout per token; row 1's middle token has no
// sampler log-prob (known 0, and a NaN in its slot).
const LOGP = [[-1, -2, -0.5], [-0.3, -1.2, -2]];
const OLD = [[-1.1, -1.5, -0.5], [-0.3, -1.0, -2.5]];
const D = [[0.2, -0.3, 1.5], [1.0, 0, -0.1]];
const ROLLOUT = OLD.map((r, i) => r.map((v, t) => v - D[i][t]));
ROLLOUT[1][1] = NaN;
const KNOWN = [[1, 1, 1], [1, 0, 1]];
const ADV = [1, -1];
const MASK = [[1, 1, 0], [1, 1, 1]];
const COUNTS: StepCounts = { sequences: 2, tokens: 5, microBatches: 1, maxCompletionLength: 4 };

/** The clipped-surrogate token losses of LOGP against OLD by hand (epsilon 0.2 / 0.28). */
function surrogate(i: number, t: number): number {
  const r = Math.exp(LOGP[i][t] - OLD[i][t]);
  const a = ADV[i];
  return -Math.min(r * a, Math.min(Math.max(r, 0.8), 1.28) * a);
}

function settings(mode: ImportanceSamplingMode | null, over: Partial<LossSettings> = {}): LossSettings {
  return { lossType: "dapo", epsilonLow: 0.2, epsilonHigh: 0.28, beta: 0, rolloutCorrection: mode ? { mode, cap: 2 } : null, ...over };
}

function run(s: LossSettings, old: number[][] | null = OLD): { loss: number; sums: Record<string, number> } {
  return tf.tidy(() => {
    const inp = {
      logp: tf.tensor2d(LOGP), oldLogp: old ? tf.tensor2d(old) : null, refLogp: tf.tensor2d(OLD), advantages: tf.tensor1d(ADV), mask: tf.tensor2d(MASK),
      rollout: { logp: tf.tensor2d(ROLLOUT), known: tf.tensor2d(KNOWN) },
    };
    const r = policyLoss(inp, s, COUNTS);
    const sums: Record<string, number> = {};
    for (const [k, v] of Object.entries(r.sums)) sums[k] = (v as tf.Scalar).dataSync()[0];
    tf.dispose(Object.values(r.sums) as tf.Tensor[]);
    return { loss: r.loss.dataSync()[0], sums };
  });
}

/** The dapo loss with each active token's surrogate weighted by `weight(i, t)` (1 where the sampler's log-prob is unknown). */
function weighted(weight: (ratio: number) => number, klBeta = 0): number {
  let sum = 0;
  for (let i = 0; i < 2; i++) {
    for (let t = 0; t < 3; t++) {
      if (!MASK[i][t]) continue;
      const w = KNOWN[i][t] ? weight(Math.exp(D[i][t])) : 1;
      const d = OLD[i][t] - LOGP[i][t];
      sum += w * surrogate(i, t) + klBeta * (Math.exp(d) - d - 1);
    }
  }
  return sum / COUNTS.tokens;
}

test("TIS (token_truncate): each token's surrogate times min(exp(old - rollout), cap), by hand", () => {
  const got = run(settings("token_truncate")).loss;
  assertClose(got, weighted((r) => Math.min(r, 2)), 1e-6, 1e-5, "token_truncate");
  // the ratios are e^0.2, e^-0.3, (e^1.5 out of the loss), e^1 capped at 2, (unknown), e^-0.1
  const byHand = (Math.exp(0.2) * surrogate(0, 0) + Math.exp(-0.3) * surrogate(0, 1) + 2 * surrogate(1, 0) + surrogate(1, 1) + Math.exp(-0.1) * surrogate(1, 2)) / 5;
  assertClose(got, byHand, 1e-6, 1e-5, "token_truncate literal");
  assert.notEqual(got, run(settings(null)).loss, "the correction changes the loss");
  assertClose(run(settings(null)).loss, weighted(() => 1), 1e-6, 1e-5, "off: the plain loss");
});

test("the cap truncates: a cap above every ratio leaves the plain ratios, a cap of 1 truncates all above 1", () => {
  assertClose(run(settings("token_truncate", { rolloutCorrection: { mode: "token_truncate", cap: 10 } })).loss, weighted((r) => r), 1e-6, 1e-5, "cap 10");
  assertClose(run(settings("token_truncate", { rolloutCorrection: { mode: "token_truncate", cap: 1 } })).loss, weighted((r) => Math.min(r, 1)), 1e-6, 1e-5, "cap 1");
});

test("token_mask: tokens whose ratio exceeds the cap are dropped, the others keep their ratio", () => {
  const got = run(settings("token_mask")).loss;
  assertClose(got, weighted((r) => (r > 2 ? 0 : r)), 1e-6, 1e-5, "token_mask");
  // row 1's first token (ratio e > 2) is gone: its surrogate is not in the sum
  const byHand = (Math.exp(0.2) * surrogate(0, 0) + Math.exp(-0.3) * surrogate(0, 1) + surrogate(1, 1) + Math.exp(-0.1) * surrogate(1, 2)) / 5;
  assertClose(got, byHand, 1e-6, 1e-5, "token_mask literal");
});

test("the KL penalty is not importance-weighted", () => {
  assertClose(run(settings("token_truncate", { beta: 0.5 })).loss, weighted((r) => Math.min(r, 2), 0.5), 1e-6, 1e-5, "dapo + kl");
});

test("a missing sampler log-prob (NaN, -Infinity or none) gives weight 1, never a NaN", () => {
  const w = tf.tidy(() => {
    const inp = { logp: tf.tensor2d(LOGP), oldLogp: tf.tensor2d(OLD), advantages: tf.tensor1d(ADV), mask: tf.tensor2d(MASK), rollout: { logp: tf.tensor2d(ROLLOUT), known: tf.tensor2d(KNOWN) } };
    return perTokenLoss(inp, settings("token_mask")).isWeight!.arraySync() as number[][];
  });
  assert.equal(w[1][1], 1, "the unknown token keeps weight 1");
  assert.ok(w.flat().every(Number.isFinite), `weights ${JSON.stringify(w)}`);
  // the trainer's rows: NaN (prompt, tool output) and non-finite sampler log-probs are "unknown"
  const b = batchTensors([{ ids: [5, 1, 2, 3, 4], mask: [0, 1, 1, 1, 1], logprobs: [NaN, -0.5, NaN, -Infinity, -0.25] }, { ids: [5, 1, 2], mask: [0, 1, 1] }]);
  assert.deepEqual(b.sampled!.mask.arraySync(), [[1, 0, 0, 1], [0, 0, 0, 0]]);
  const loss = tf.tidy(() => {
    const logp = tf.fill([2, 4], -1) as tf.Tensor2D;
    const r = policyLoss({ logp, oldLogp: null, advantages: tf.tensor1d([1, -1]), mask: b.mask, rollout: { logp: b.sampled!.logp, known: b.sampled!.mask } }, settings("token_truncate"), { ...COUNTS, tokens: b.tokens });
    const out = [r.loss.dataSync()[0], ...Object.values(r.sums).map((v) => (v as tf.Scalar).dataSync()[0])];
    tf.dispose(Object.values(r.sums) as tf.Tensor[]);
    return out;
  });
  assert.ok(loss.every(Number.isFinite), `loss and sums ${loss}`);
  tf.dispose([b.mask, b.sampled!.logp, b.sampled!.mask]);
});

test("mismatch figures over the tokens in the loss with a sampler log-prob: ratio mean / min / max, clipped fraction, KL direct and k3", () => {
  const { sums } = run(settings("token_truncate"));
  const m = mismatchMetrics(sums);
  // compared tokens: row 0 t0, t1; row 1 t0, t2 (row 0 t2 is out of the loss, row 1 t1 has no log-prob)
  const d = [0.2, -0.3, 1.0, -0.1];
  const mean = (f: (x: number) => number) => d.reduce((a, x) => a + f(x), 0) / d.length;
  assert.equal(sums.isTokens, 4);
  assertClose(m.is_ratio_mean, mean(Math.exp), 1e-6, 1e-5, "is_ratio_mean");
  assertClose(m.is_ratio_max, Math.exp(1), 1e-6, 1e-5, "is_ratio_max");
  assertClose(m.is_ratio_min, Math.exp(-0.3), 1e-6, 1e-5, "is_ratio_min");
  assert.equal(m.is_clipped_frac, 1 / 4);
  assertClose(m.rollout_kl, mean((x) => -x), 1e-6, 1e-5, "rollout_kl: mean(rollout - old)");
  assertClose(m.rollout_kl_k3, mean((x) => Math.exp(x) - x - 1), 1e-6, 1e-5, "rollout_kl_k3");
  assertClose(m.sampling_logp_diff_mean, mean(Math.abs), 1e-6, 1e-5, "sampling_logp_diff_mean");
  assertClose(m.sampling_logp_diff_max, 1, 1e-6, 1e-5, "sampling_logp_diff_max");
  assert.equal(mismatchMetrics(run(settings(null)).sums).is_clipped_frac, undefined, "no clipped fraction without a correction");
  assert.deepEqual(mismatchMetrics({ isTokens: 0 }), {}, "nothing to compare, nothing logged");
});

// Gradients on the tiny model: with mu = 1 the old log-probs are the detached current ones, so the
// weight min(exp(logp - rollout), cap) moves with the weights; it must still be a constant of the loss.
const IDS = [[1, 3, 2, 5, 0], [4, 2, 2, 1, 6]];
const GMASK = [[0, 1, 1, 1], [0, 1, 1, 0]];
const ADVG = [0.7, -1.3];
// rollout = start - SHIFT: ratios e^0.4 (kept), e^-0.4, e^0.9 (capped at 2), e^-0.05 ...
const SHIFT = [[0, 0.4, -0.4, 0.9], [0, -0.05, 0.8, 0.3]];

for (const mode of ["token_truncate", "token_mask"] as const) {
  test(`${mode}: the gradient flows through the log-probs only (the weight is detached)`, () => {
    const lm = new TinyLM({ vocab: 7, dim: 3, maxLen: 8, seed: 11 });
    const s: LossSettings = { lossType: "dapo", epsilonLow: 0.2, epsilonHigh: 0.28, beta: 0, rolloutCorrection: { mode, cap: 2 } };
    const counts: StepCounts = { sequences: 2, tokens: 5, microBatches: 1, maxCompletionLength: 4 };
    const mask = tf.tensor2d(GMASK);
    const adv = tf.tensor1d(ADVG);
    const start = tf.keep(sequenceLogprobs(lm, IDS).logp);
    const rollout = { logp: tf.keep(tf.sub(start, tf.tensor2d(SHIFT))) as tf.Tensor2D, known: tf.onesLike(start) as tf.Tensor2D };
    // the weights at the base point, held fixed in the finite-difference target
    const w0 = SHIFT.map((r) => r.map((x) => (mode === "token_truncate" ? Math.min(Math.exp(x), 2) : Math.exp(x) > 2 ? 0 : Math.exp(x))));
    const lossOf = (logp: tf.Tensor2D) => {
      const r = policyLoss({ logp, oldLogp: null, advantages: adv, mask, rollout }, s, counts);
      tf.dispose(Object.values(r.sums) as tf.Tensor[]);
      return r.loss;
    };
    // at the base point the on-policy ratio is 1, inside the clip range: the token loss is -w0 A exp(logp - start)
    const target = () =>
      tf.tidy(() => {
        const logp = sequenceLogprobs(lm, IDS).logp;
        const tok = tf.neg(tf.mul(tf.mul(tf.tensor2d(w0), tf.expandDims(adv, 1)), tf.exp(tf.sub(logp, start))));
        return tf.div(tf.sum(tf.mul(tok, mask)), counts.tokens).dataSync()[0];
      });
    assertClose(tf.tidy(() => lossOf(sequenceLogprobs(lm, IDS).logp).dataSync()[0]), target(), 1e-6, 1e-5, "value at the base point");
    const vars = lm.trainableParams().map((p) => p.variable);
    const { grads } = tf.variableGrads(() => lossOf(sequenceLogprobs(lm, IDS).logp), vars);
    let checked = 0;
    for (const v of vars) {
      const g = grads[v.name].dataSync();
      for (let i = 0; i < v.size; i += 3) {
        assertClose(g[i], finiteDiff(target, v, i, 5e-3), 3e-4, 2e-2, `${mode} d/d${v.name}[${i}]`);
        checked++;
      }
    }
    assert.ok(checked > 20);
    assert.ok(Object.values(grads).some((g) => Array.from(g.dataSync()).some((x) => Math.abs(x) > 1e-4)), "gradient is not identically zero");
    tf.dispose([start, rollout.logp, rollout.known, mask, adv, ...Object.values(grads)]);
    lm.dispose();
  });
}
