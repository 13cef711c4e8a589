/**
 * The fused RMSNorm, RoPE and SwiGLU kernels of the webgpu backend (lib/backend/webgpu/train/layer-kernels.ts,
 * rope-swiglu.ts) against the tfjs ops path of lib/model/decoder.ts, on the same backend and on the CPU:
 * values and the gradients of every differentiable input, at shapes that are not multiples of the
 * workgroups, one row, and rank 4 (the per-head norm); the dispatches each call records; and a whole tiny
 * decoder, logits and the gradients of a loss w.r.t. every weight, fused against ops.
 *
 * It needs a WebGPU adapter. Without a GPU, Mesa's software Vulkan driver (lavapipe) provides one:
 *   VK_DRIVER_FILES=/opt/lvp/lvp_icd.json XDG_RUNTIME_DIR=/tmp node scripts/run-tests.mjs test/backend/layer-kernels.test.ts
 * When no adapter can be created the tests are skipped with the reason.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { relErr, startWebgpu } from "./kernel-support.js";
import { tf } from "../../lib/backend/tf.js";
import { useFusedKernels } from "../../lib/backend/webgpu/train/fused.js";
import { rmsNorm, rotate, rotateHalfMatrix, swiglu } from "../../lib/model/decoder.js";
import { rotaryTables, inverseFrequencies } from "../../lib/model/rope.js";
import { randomModel, tinyConfig } from "../../lib/model/random-model.js";
import { ModelTrainable } from "../../lib/train/trainable-model.js";
import { SeededRandom } from "../../lib/core/random.js";
import { countDispatches } from "../../bench/dispatches.js";

type Arrays = { data: Float32Array; shape: number[] }[];

const reason = await startWebgpu({ gpuOnly: true });

function random(shape: number[], seed: number, mean = 0, std = 1): { data: Float32Array; shape: number[] } {
  const rng = new SeededRandom(seed);
  return { data: Float32Array.from({ length: shape.reduce((a, b) => a * b, 1) }, () => mean + std * rng.normal()), shape };
}

/**
 * f's output and the gradients of sum(f · r) w.r.t. the inputs numbered in `wrt` (r a fixed random
 * cotangent), read back as arrays.
 */
async function valueAndGrads(f: (...xs: tf.Tensor[]) => tf.Tensor, inputs: Arrays, wrt: number[]): Promise<Float32Array[]> {
  const out = tf.tidy(() => {
    const xs = inputs.map((a) => tf.tensor(a.data, a.shape));
    const y = f(...xs);
    const r = tf.tensor(random(y.shape, 99).data, y.shape);
    const grads = tf.grads((...ws: tf.Tensor[]) => {
      const all = xs.map((x, i) => (wrt.includes(i) ? ws[wrt.indexOf(i)] : x));
      return tf.sum(tf.mul(f(...all), r));
    })(wrt.map((i) => xs[i]));
    return [y, ...grads];
  });
  const arrays = await Promise.all(out.map(async (t) => (await t.data()) as Float32Array));
  tf.dispose(out);
  return arrays;
}


/** Dispatches f records. */
async function forwardDispatches(f: (...xs: tf.Tensor[]) => tf.Tensor, inputs: Arrays): Promise<number> {
  const xs = inputs.map((a) => tf.tensor(a.data, a.shape));
  const { result, dispatches } = await countDispatches(async () => f(...xs));
  tf.dispose([result, ...xs]);
  return dispatches ?? 0;
}

/** Fused on WebGPU against the ops path on WebGPU and on the CPU, values and gradients. */
async function checkAgainstOps(label: string, fused: (...xs: tf.Tensor[]) => tf.Tensor, opsPath: (...xs: tf.Tensor[]) => tf.Tensor, inputs: Arrays, wrt: number[]): Promise<void> {
  useFusedKernels(true);
  const got = await valueAndGrads(fused, inputs, wrt);
  assert.equal(await forwardDispatches(fused, inputs), 1, `${label}: the fused forward is one dispatch`);
  useFusedKernels(false);
  const gpuOps = await valueAndGrads(opsPath, inputs, wrt);
  assert.ok((await forwardDispatches(opsPath, inputs)) > 1, `${label}: the ops path is several dispatches`);
  useFusedKernels(true);
  await tf.setBackend("cpu");
  const cpuOps = await valueAndGrads(opsPath, inputs, wrt);
  await tf.setBackend("webgpu");
  const names = ["value", ...wrt.map((i) => `grad ${i}`)];
  got.forEach((g, k) => {
    for (const [ref, where] of [[gpuOps[k], "webgpu ops"], [cpuOps[k], "cpu ops"]] as const) {
      const e = relErr(g, ref);
      assert.ok(e < 2e-5, `${label} ${names[k]} vs ${where}: relative error ${e}`);
    }
  });
}

const EPS = 1e-6;

test("fused RMSNorm matches the ops path: values, dx and dw", async (t) => {
  if (reason) return t.skip(reason);
  const cases: Array<[string, number[]]> = [
    ["D not a multiple of the workgroup", [5, 37]],
    ["one row, D over 256", [1, 300]],
    ["rank 3 hidden states", [2, 7, 96]],
    ["rank 4 per-head norm", [2, 3, 4, 16]],
    ["rows over 512 (several rows per dw chunk), three columns per lane", [613, 600]],
    // tfjs-backend-webgpu folds a dispatch of more than 65,535 workgroups into two dimensions
    ["rows past 65,535 (a folded dispatch)", [65537, 3]],
  ];
  for (const [label, shape] of cases) {
    const D = shape[shape.length - 1];
    const inputs = [random(shape, 1, 0, 2), random([D], 2, 1, 0.3)];
    const f = (x: tf.Tensor, w: tf.Tensor) => rmsNorm(x, w as tf.Tensor1D, EPS);
    await checkAgainstOps(`rmsnorm ${label} [${shape}]`, f, f, inputs, [0, 1]);
  }
});

/** The decoder's rotate (the fused kernel when fused kernels are on, the permutation matmul when off). */
const rotateBy = (hd: number) => (x: tf.Tensor, cos: tf.Tensor, sin: tf.Tensor) => tf.tidy(() => rotate(x, cos, sin, rotateHalfMatrix(hd)));

test("fused RoPE matches the ops path: values and dx (cos/sin broadcast over heads)", async (t) => {
  if (reason) return t.skip(reason);
  for (const [B, T, H, hd] of [[2, 3, 5, 12], [1, 1, 1, 8], [2, 7, 2, 64]]) {
    const positions = Array.from({ length: B * T }, (_, i) => (i * 7) % 23);
    const { cos, sin } = rotaryTables(positions, inverseFrequencies(hd, 10000, { type: "default" }));
    const inputs = [random([B, T, H, hd], 3), { data: cos, shape: [B, T, 1, hd] }, { data: sin, shape: [B, T, 1, hd] }];
    await checkAgainstOps(`rope [${B},${T},${H},${hd}]`, rotateBy(hd), rotateBy(hd), inputs, [0]);
  }
  // rotary tables repeat each angle in both halves; tables that do not would show a kernel mixing them up
  const [B, T, H, hd] = [2, 3, 3, 10];
  const tables = [random([B, T, H, hd], 6), random([B, T, 1, hd], 7), random([B, T, 1, hd], 8)];
  await checkAgainstOps("rope, unrepeated tables", rotateBy(hd), rotateBy(hd), tables, [0]);
});

test("fused RoPE gives cos and sin zero gradients (they are constants)", async (t) => {
  if (reason) return t.skip(reason);
  const { ropeFused } = await import("../../lib/backend/webgpu/train/rope-swiglu.js");
  const [dc, ds] = tf.tidy(() => tf.grads((c: tf.Tensor, s: tf.Tensor) => tf.sum(ropeFused(tf.ones([1, 2, 3, 4]), c, s)))([tf.ones([1, 2, 1, 4]), tf.ones([1, 2, 1, 4])]));
  assert.deepEqual(Array.from(await dc.data()), new Array(8).fill(0));
  assert.deepEqual(Array.from(await ds.data()), new Array(8).fill(0));
  tf.dispose([dc, ds]);
});

test("fused SwiGLU matches the ops path: values, dgate and dup", async (t) => {
  if (reason) return t.skip(reason);
  for (const shape of [[3, 37], [1, 300], [2, 5, 64]]) {
    const inputs = [random(shape, 4, 0, 3), random(shape, 5)];
    await checkAgainstOps(`swiglu [${shape}]`, swiglu, swiglu, inputs, [0, 1]);
  }
});

test("the fused kernels record one dispatch forward and one per gradient (two for dw)", async (t) => {
  if (reason) return t.skip(reason);
  const { rmsNormFused } = await import("../../lib/backend/webgpu/train/layer-kernels.js");
  const { ropeFused, swigluFused } = await import("../../lib/backend/webgpu/train/rope-swiglu.js");
  const x = tf.randomNormal([6, 40], 0, 1, "float32", 1);
  const w = tf.randomNormal([40], 1, 0.1, "float32", 2) as tf.Tensor1D;
  const dy = tf.randomNormal([6, 40], 0, 1, "float32", 3);
  const q = tf.randomNormal([1, 6, 2, 20], 0, 1, "float32", 4);
  const cs = tf.randomNormal([1, 6, 1, 20], 0, 1, "float32", 5);
  const count = async (f: () => tf.Tensor | tf.Tensor[]) => {
    const { result, dispatches } = await countDispatches(async () => f());
    tf.dispose(result);
    return dispatches;
  };
  // warm the pipelines first, so compilation cannot change what is counted
  await count(() => tf.grads((a: tf.Tensor, b: tf.Tensor) => rmsNormFused(a, b as tf.Tensor1D, EPS))([x, w], dy));
  assert.equal(await count(() => rmsNormFused(x, w, EPS)), 1, "rmsnorm forward");
  assert.equal(await count(() => tf.grad((a: tf.Tensor) => rmsNormFused(a, w, EPS))(x, dy)), 2, "rmsnorm forward + dx");
  assert.equal(await count(() => tf.grads((a: tf.Tensor, b: tf.Tensor) => rmsNormFused(a, b as tf.Tensor1D, EPS))([x, w], dy)), 4, "rmsnorm forward + dx + dw");
  assert.equal(await count(() => ropeFused(q, cs, cs)), 1, "rope forward");
  assert.equal(await count(() => tf.grad((a: tf.Tensor) => ropeFused(a, cs, cs))(q, q)), 2, "rope forward + dx");
  assert.equal(await count(() => swigluFused(x, dy)), 1, "swiglu forward");
  assert.equal(await count(() => tf.grads((a: tf.Tensor, b: tf.Tensor) => swigluFused(a, b))([x, dy], x)), 3, "swiglu forward + dgate + dup");
  tf.dispose([x, w, dy, q, cs]);
});

/** Logits of a fixed batch and the gradients of a loss w.r.t. every weight of a random tiny decoder. */
async function decoderRun(fused: boolean, qkNorm: boolean): Promise<{ logits: Float32Array; grads: Map<string, Float32Array> }> {
  useFusedKernels(fused);
  try {
    const c = tinyConfig({ vocabSize: 96, hiddenSize: 40, intermediateSize: 72, numLayers: 2, numHeads: 4, numKvHeads: 2, headDim: 10, qkNorm, attentionBias: true });
    const model = randomModel(c, { seed: 7, name: `tiny-${fused ? "fused" : "ops"}-${qkNorm ? "qk" : "plain"}` });
    const lm = new ModelTrainable(model, null);
    const params = lm.trainableParams();
    // norm weights start at one; move them so a kernel that dropped w would show
    params.forEach((p, i) => {
      if (p.variable.rank === 1 && /norm/.test(p.name)) p.variable.assign(tf.tensor(random(p.variable.shape, 50 + i, 1, 0.2).data, p.variable.shape));
    });
    const ids = [[5, 17, 33, 2, 90, 41, 7], [12, 60, 3, 8, 8, 1, 0]];
    const r = tf.tensor(random([2, 7, 96], 11).data, [2, 7, 96]);
    const logits = tf.tidy(() => lm.logits(ids));
    const { grads } = tf.variableGrads(() => tf.sum(tf.mul(lm.logits(ids), r)) as tf.Scalar, params.map((p) => p.variable));
    const byName = new Map<string, Float32Array>();
    for (const p of params) byName.set(p.name, (await grads[p.variable.name].data()) as Float32Array);
    const out = { logits: (await logits.data()) as Float32Array, grads: byName };
    tf.dispose([logits, r, ...Object.values(grads)]);
    lm.dispose();
    model.dispose();
    return out;
  } finally {
    useFusedKernels(true);
  }
}

for (const qkNorm of [false, true]) {
  test(`a tiny decoder${qkNorm ? " with q/k norms" : ""}: logits and every weight's gradient, fused vs ops, within 1e-4`, async (t) => {
    if (reason) return t.skip(reason);
    const fused = await decoderRun(true, qkNorm);
    const opsRun = await decoderRun(false, qkNorm);
    assert.ok(relErr(fused.logits, opsRun.logits) < 1e-4, `logits: ${relErr(fused.logits, opsRun.logits)}`);
    assert.equal(fused.grads.size, opsRun.grads.size);
    for (const [name, g] of opsRun.grads) {
      const e = relErr(fused.grads.get(name)!, g);
      assert.ok(e < 1e-4, `${name}: relative error ${e}`);
    }
  });
}
