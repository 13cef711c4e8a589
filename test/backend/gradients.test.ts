import { test } from "node:test";
import assert from "node:assert/strict";
import * as tf from "@tensorflow/tfjs-core";
import { assertClose, finiteDiff, useCpu } from "../train/tiny-lm.js";
import { SeededRandom } from "../../lib/core/random.js";

await useCpu();
const rng = new SeededRandom(7);
const rand = (shape: number[], lo = -1, hi = 1) => tf.tensor(Array.from({ length: shape.reduce((a, b) => a * b, 1) }, () => lo + (hi - lo) * rng.next()), shape);

/** Checks d/dx sum(f(x...) * R) against central differences for every element of every input. */
function check(name: string, f: (...xs: tf.Tensor[]) => tf.Tensor, inputs: tf.Tensor[], h = 1e-2): void {
  const vars = inputs.map((x, i) => tf.variable(x, true, `${name}.${i}.${rng.below(1e9)}`));
  const out = tf.tidy(() => f(...vars));
  const R = rand(out.shape);
  out.dispose();
  const loss = () => tf.tidy(() => tf.sum(tf.mul(f(...vars), R)).dataSync()[0]);
  const { grads } = tf.variableGrads(() => tf.sum(tf.mul(f(...vars), R)) as tf.Scalar, vars);
  vars.forEach((v) => {
    const g = grads[v.name].dataSync();
    for (let i = 0; i < v.size; i++) assertClose(g[i], finiteDiff(loss, v, i, h), 2e-3, 2e-2, `${name} input ${v.name} [${i}]`);
  });
  for (const v of vars) v.dispose();
  for (const g of Object.values(grads)) g.dispose();
}

const unaries: Array<[string, (x: tf.Tensor) => tf.Tensor, number, number]> = [
  ["exp", tf.exp, -1, 1], ["log", tf.log, 0.5, 2], ["sqrt", tf.sqrt, 0.5, 2], ["rsqrt", tf.rsqrt, 0.5, 2],
  ["square", tf.square, -1, 1], ["sigmoid", tf.sigmoid, -2, 2], ["tanh", tf.tanh, -2, 2], ["neg", tf.neg, -1, 1],
  ["sin", tf.sin, -2, 2], ["cos", tf.cos, -2, 2], ["softplus", tf.softplus, -2, 2], ["abs", tf.abs, 0.2, 1],
  ["relu", tf.relu, 0.2, 1], ["reciprocal", tf.reciprocal, 0.5, 2], ["log1p", tf.log1p, 0, 1],
  ["silu", (x) => tf.mul(x, tf.sigmoid(x)), -2, 2], ["cast", (x) => tf.cast(x, "float32"), -1, 1], ["erf", tf.erf, -1, 1],
];
for (const [name, f, lo, hi] of unaries) test(`gradient of ${name}`, () => check(name, f, [rand([2, 3], lo, hi)]));

test("gradients of binary ops with broadcasting", () => {
  check("add", tf.add, [rand([2, 3]), rand([3])]);
  check("sub", tf.sub, [rand([2, 1]), rand([2, 3])]);
  check("mul", tf.mul, [rand([2, 3]), rand([1, 3])]);
  check("div", tf.div, [rand([2, 3]), rand([2, 3], 0.5, 2)]);
  check("maximum", tf.maximum, [rand([2, 3]), tf.fill([2, 3], 0.05)]);
  check("minimum", tf.minimum, [rand([2, 3]), tf.fill([3], 0.05)]);
  check("pow", tf.pow, [rand([2, 3], 0.5, 2), rand([2, 3], 1, 2)]);
  check("squaredDifference", tf.squaredDifference, [rand([2, 3]), rand([3])]);
  check("addN", (a, b) => tf.addN([a, b, a]), [rand([2, 2]), rand([2, 2])]);
});

test("gradients of matMul in all transpose modes and with batch broadcasting", () => {
  for (const ta of [false, true]) for (const tb of [false, true]) {
    check(`matMul${ta}${tb}`, (a, b) => tf.matMul(a, b, ta, tb), [rand(ta ? [3, 2] : [2, 3]), rand(tb ? [4, 3] : [3, 4])]);
  }
  check("batchMatMul", (a, b) => tf.matMul(a, b), [rand([2, 2, 3]), rand([2, 3, 2])]);
  check("broadcastMatMul", (a, b) => tf.matMul(a, b), [rand([2, 2, 3]), rand([3, 2])]);
});

test("gradients of reductions and softmax", () => {
  check("sum", (x) => tf.sum(x, 1), [rand([2, 3])]);
  check("sumKeep", (x) => tf.sum(x, -1, true), [rand([2, 3])]);
  check("mean", (x) => tf.mean(x, [0, 2]), [rand([2, 3, 2])]);
  check("max", (x) => tf.max(x, 1), [tf.tensor([[0.1, 0.5, -0.3], [0.9, 0.2, 0.4]])]);
  check("min", (x) => tf.min(x, 0), [tf.tensor([[0.1, 0.5, -0.3], [0.9, 0.2, 0.4]])]);
  check("softmax", (x) => tf.softmax(x), [rand([2, 4])]);
  check("logSoftmax", (x) => tf.logSoftmax(x), [rand([2, 4])]);
  check("logSumExp", (x) => tf.logSumExp(x, -1), [rand([2, 4])]);
});

test("gradients of shape ops", () => {
  check("reshape", (x) => tf.reshape(x, [3, 2]), [rand([2, 3])]);
  check("expandDims", (x) => tf.expandDims(x, 1), [rand([2, 3])]);
  check("squeeze", (x) => tf.squeeze(x), [rand([2, 1, 3])]);
  check("transpose", (x) => tf.transpose(x, [2, 0, 1]), [rand([2, 3, 2])]);
  check("slice", (x) => tf.slice(x, [0, 1], [2, 2]), [rand([2, 4])]);
  check("pad", (x) => tf.pad(x, [[1, 0], [0, 2]]), [rand([2, 2])]);
  check("concat", (a, b) => tf.concat([a, b], 1), [rand([2, 2]), rand([2, 3])]);
  check("stack", (a, b) => tf.stack([a, b], 1), [rand([2, 2]), rand([2, 2])]);
  check("unstack", (x) => tf.unstack(x, 1)[1], [rand([2, 3])]);
  check("split", (x) => tf.split(x, [1, 2], 1)[1], [rand([2, 3])]);
  check("tile", (x) => tf.tile(x, [2, 3]), [rand([2, 2])]);
  check("broadcastTo", (x) => tf.broadcastTo(x, [3, 2, 2]), [rand([2, 1])]);
  check("tile of rank 4, repeats of 1 mixed in", (x) => tf.tile(x, [3, 1, 2, 1]), [rand([1, 2, 2, 3])]);
  check("broadcastTo over the batch axis (a shared prefix's keys)", (x) => tf.broadcastTo(x, [3, 2, 2, 2]), [rand([1, 2, 2, 2])]);
  check("where", (a, b) => tf.where(tf.tensor([[true, false], [false, true]]), a, b), [rand([2, 2]), rand([2, 2])]);
  check("clipByValue", (x) => tf.clipByValue(x, -0.5, 0.5), [tf.tensor([-0.9, -0.2, 0.3, 0.8])]);
  check("gather0", (x) => tf.gather(x, tf.tensor1d([2, 0, 2], "int32")), [rand([3, 2])]);
  check("gather1", (x) => tf.gather(x, tf.tensor1d([1, 1, 0], "int32"), 1), [rand([2, 3, 2])]);
});

test("gather's gradient needs no UnsortedSegmentSum kernel (wasm has none)", async () => {
  const { registerKernel, unregisterKernel, getKernel } = tf;
  const k = getKernel("UnsortedSegmentSum", "cpu")!;
  unregisterKernel("UnsortedSegmentSum", "cpu");
  try {
    check("gatherOneHot", (x) => tf.gather(x, tf.tensor1d([2, 0, 2, 1], "int32")), [rand([3, 2])]);
  } finally {
    registerKernel(k);
  }
});

test("the tile gradient sums over a view of rank at most 6 (WebGPU shaders stop there)", () => {
  const engine = tf.engine() as unknown as { runKernel: (name: string, inputs: Record<string, tf.Tensor>, attrs: unknown) => unknown };
  const original = engine.runKernel;
  let maxSumRank = 0;
  engine.runKernel = function (this: unknown, name, inputs, attrs) {
    if (name === "Sum") maxSumRank = Math.max(maxSumRank, inputs.x.rank);
    return original.call(this, name, inputs, attrs);
  };
  try {
    const x = tf.ones([1, 2, 3, 4, 5]);
    const g = tf.grad((t: tf.Tensor) => tf.sum(tf.tile(t, [2, 1, 3, 1, 1])))(x);
    assert.deepEqual(Array.from(g.dataSync()).slice(0, 3), [6, 6, 6]);
    tf.dispose([x, g]);
  } finally {
    engine.runKernel = original;
  }
  assert.ok(maxSumRank > 0 && maxSumRank <= 6, `sum over rank ${maxSumRank}`);
});
