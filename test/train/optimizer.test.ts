import { test } from "node:test";
import assert from "node:assert/strict";
import * as tf from "@tensorflow/tfjs-core";
import { assertClose, TinyLM, useCpu } from "./tiny-lm.js";
import { AdamW, clipFactor, clipGlobalNorm, globalGradNorm, GradAccumulator } from "../../lib/train/optimizer.js";
import { learningRate } from "../../lib/train/schedule.js";
import { policyLoss, stepCounts } from "../../lib/train/losses.js";
import { sequenceLogprobs } from "../../lib/train/logprobs.js";

await useCpu();

test("AdamW matches a hand-computed update with decoupled weight decay", () => {
  const v = tf.variable(tf.tensor1d([1, -2]), true, "adamw.hand");
  const opt = new AdamW([{ name: "w", variable: v }], { beta1: 0.9, beta2: 0.99, eps: 1e-8, weightDecay: 0.1 });
  const g1 = [0.5, -1];
  const g2 = [0.1, 0.3];
  opt.step(new Map([["w", tf.tensor1d(g1)]]), 0.01);
  opt.step(new Map([["w", tf.tensor1d(g2)]]), 0.02);
  // the same two steps in plain arithmetic (PyTorch's AdamW order: decay, then the Adam step)
  const p = [1, -2];
  const m = [0, 0];
  const s = [0, 0];
  [[g1, 0.01], [g2, 0.02]].forEach(([g, lr], k) => {
    const t = k + 1;
    for (let i = 0; i < 2; i++) {
      const gi = (g as number[])[i];
      m[i] = 0.9 * m[i] + 0.1 * gi;
      s[i] = 0.99 * s[i] + 0.01 * gi * gi;
      p[i] *= 1 - (lr as number) * 0.1;
      p[i] -= ((lr as number) * (m[i] / (1 - 0.9 ** t))) / (Math.sqrt(s[i] / (1 - 0.99 ** t)) + 1e-8);
    }
  });
  const got = v.dataSync();
  for (let i = 0; i < 2; i++) assertClose(got[i], p[i], 1e-6, 1e-5, `param ${i}`);
  assert.equal(opt.state().t, 2);
  opt.dispose();
  v.dispose();
});

test("warm-up is linear and the cosine ends at the floor", () => {
  const o = { lr: 1, schedule: "cosine" as const, warmupSteps: 4, totalSteps: 14, minLrRatio: 0.1 };
  assert.deepEqual([0, 1, 2, 3].map((s) => learningRate(s, o)), [0.25, 0.5, 0.75, 1]);
  assertClose(learningRate(9, o), 0.1 + 0.9 * 0.5, 1e-12, 0, "midpoint");
  assertClose(learningRate(14, o), 0.1, 1e-12, 0, "end");
  assertClose(learningRate(40, o), 0.1, 1e-12, 0, "past the end");
  assert.equal(learningRate(9, { ...o, schedule: "constant" }), 1);
});

test("global-norm clipping scales all gradients by the same factor", async () => {
  const grads = new Map([["a", tf.tensor1d([3, 0])], ["b", tf.tensor1d([0, 4])]]);
  const norm = await clipGlobalNorm(grads, 1);
  assertClose(norm, 5, 1e-6, 0, "norm");
  assertClose(grads.get("a")!.dataSync()[0], 0.6, 1e-5, 0, "a");
  assertClose(grads.get("b")!.dataSync()[1], 0.8, 1e-5, 0, "b");
  const small = new Map([["a", tf.tensor1d([0.3, 0.4])]]);
  await clipGlobalNorm(small, 1);
  assertClose(small.get("a")!.dataSync()[1], 0.4, 1e-7, 0, "untouched below the limit");
});

test("folding the clip factor into AdamW gives the update of clipping first", async () => {
  const run = async (folded: boolean) => {
    const v = tf.variable(tf.tensor2d([[1, -2, 0.5], [0.1, 3, -1]]), true);
    const opt = new AdamW([{ name: "w", variable: v }], { weightDecay: 0.01 });
    for (const g of [[[3, -4, 1], [0.5, 2, -6]], [[-1, 2, 0.3], [4, -0.2, 1]]]) {
      const grads = new Map([["w", tf.tensor2d(g)]]);
      if (folded) {
        const norm = await globalGradNorm(grads);
        opt.step(grads, 0.05, clipFactor(norm, 1));
      } else {
        await clipGlobalNorm(grads, 1);
        opt.step(grads, 0.05);
      }
      for (const t of grads.values()) t.dispose();
    }
    const out = Array.from(v.dataSync());
    opt.dispose();
    v.dispose();
    return out;
  };
  const [a, b] = [await run(true), await run(false)];
  a.forEach((x, i) => assertClose(x, b[i], 1e-6, 1e-6, `param ${i}`));
  assert.equal(clipFactor(0.5, 1), 1, "within the limit");
  assert.equal(clipFactor(10, 0), 1, "no clipping");
  assertClose(clipFactor(10, 1), 0.1, 1e-6, 0, "down to the limit");
});

test("accumulating micro-batch gradients equals the full-batch gradient (dapo and grpo)", () => {
  for (const lossType of ["dapo", "grpo", "dr_grpo"] as const) {
    const lm = new TinyLM({ vocab: 6, dim: 3, maxLen: 6, seed: 3 });
    const vars = lm.trainableParams();
    const ids = [[1, 2, 3, 4], [2, 2, 5, 0], [3, 1, 1, 2], [4, 5, 0, 0]];
    const mask = [[0, 1, 1], [0, 1, 0], [1, 1, 1], [0, 0, 0]];
    const adv = [1, -0.5, 0.3, 2];
    const settings = { lossType, epsilonLow: 0.2, epsilonHigh: 0.28, beta: 0 };
    const gradsOf = (rows: number[]) => {
      const counts = stepCounts(rows.length === 4 ? [mask] : [[mask[0], mask[1]], [mask[2], mask[3]]], 5);
      const parts = rows.length === 4 ? [rows] : [[0, 1], [2, 3]];
      const acc = new GradAccumulator();
      for (const part of parts) {
        const idsT = part.map((i) => ids[i]);
        const { grads } = tf.variableGrads(() => {
          const logp = sequenceLogprobs(lm, idsT).logp;
          const r = policyLoss({ logp, oldLogp: null, advantages: tf.tensor1d(part.map((i) => adv[i])), mask: tf.tensor2d(part.map((i) => mask[i])) }, settings, counts);
          tf.dispose(Object.values(r.sums));
          return r.loss;
        }, vars.map((v) => v.variable));
        acc.add(new Map(vars.map((v) => [v.name, grads[v.variable.name]])));
      }
      return acc;
    };
    const whole = gradsOf([0, 1, 2, 3]);
    const split = gradsOf([0, 1]);
    for (const v of vars) {
      const a = whole.grads.get(v.name)!.dataSync();
      const b = split.grads.get(v.name)!.dataSync();
      for (let i = 0; i < a.length; i++) assertClose(b[i], a[i], 1e-6, 1e-4, `${lossType} ${v.name}[${i}]`);
    }
    whole.dispose();
    split.dispose();
    lm.dispose();
  }
});
