/**
 * The fused target log-prob kernels (lib/backend/webgpu/train/logprob-kernels.ts) against the tfjs ops path of
 * targetLogprobs on the same backend and on the CPU backend: log-probs, entropies and the gradient w.r.t.
 * the logits, at temperatures 1 and 0.7, vocabularies that are not multiples of the workgroup size, extreme
 * logits, grids folded past 65,535 workgroups, and through a tiny trainable model as GRPO uses it.
 *
 * It needs a WebGPU adapter. Without a GPU, Mesa's software Vulkan driver (lavapipe) provides one:
 *   VK_DRIVER_FILES=/opt/lvp/lvp_icd.json XDG_RUNTIME_DIR=/tmp node scripts/run-tests.mjs test/backend/logprob-kernels.test.ts
 * When no adapter can be created the tests are skipped with the reason.
 */
import { before, test } from "node:test";
import assert from "node:assert/strict";
import { relErr, startWebgpu } from "./kernel-support.js";
import { tf } from "../../lib/backend/tf.js";
import { useFusedKernels } from "../../lib/backend/webgpu/train/fused.js";
import { TARGET_LOGPROBS, TARGET_LOGPROBS_GRAD } from "../../lib/backend/webgpu/train/logprob-kernels.js";
import { randomModel, tinyConfig } from "../../lib/model/random-model.js";
import { sequenceLogprobs, targetLogprobs } from "../../lib/train/logprobs.js";
import { ModelTrainable } from "../../lib/train/trainable-model.js";

let reason: string | null = null;

before(async () => {
  reason = await startWebgpu();
});

interface Result {
  logp: Float32Array;
  entropy: Float32Array;
  grad: Float32Array;
}

/** logp, entropy and d(Σ w · logp)/d logits on the active backend, fused or through the ops path. */
async function run(fused: boolean, logits: Float32Array, shape: [number, number, number], targets: Int32Array, weights: Float32Array, temperature: number): Promise<Result> {
  useFusedKernels(fused);
  try {
    const [b, t] = shape;
    const x = tf.tensor3d(logits, shape);
    const tg = tf.tensor2d(targets, [b, t], "int32");
    const w = tf.tensor2d(weights, [b, t]);
    const r = targetLogprobs(x, tg, temperature, true);
    const g = tf.grad((z: tf.Tensor) => tf.sum(tf.mul(targetLogprobs(z as tf.Tensor3D, tg, temperature).logp, w)))(x);
    const out = { logp: (await r.logp.data()) as Float32Array, entropy: (await r.entropy!.data()) as Float32Array, grad: (await g.data()) as Float32Array };
    tf.dispose([x, tg, w, r.logp, r.entropy!, g]);
    return out;
  } finally {
    useFusedKernels(true);
  }
}

/** The ops path on the CPU backend (then back to webgpu). */
async function onCpu(logits: Float32Array, shape: [number, number, number], targets: Int32Array, weights: Float32Array, temperature: number): Promise<Result> {
  await tf.setBackend("cpu");
  try {
    return await run(false, logits, shape, targets, weights, temperature);
  } finally {
    await tf.setBackend("webgpu");
  }
}


function assertFinite(xs: Float32Array, what: string): void {
  for (let i = 0; i < xs.length; i++) assert.ok(Number.isFinite(xs[i]), `${what}[${i}] = ${xs[i]}`);
}

/** Seeded inputs: logits scale·N(0,1), targets spread over the vocabulary (first and last ids included). */
async function inputs(shape: [number, number, number], scale: number, seed: number): Promise<{ logits: Float32Array; targets: Int32Array; weights: Float32Array }> {
  const [b, t, v] = shape;
  const read = async (x: tf.Tensor) => {
    const data = (await x.data()) as Float32Array;
    x.dispose();
    return data;
  };
  const logits = await read(tf.tidy(() => tf.mul(tf.randomNormal(shape, 0, 1, "float32", seed), scale)));
  const targets = Int32Array.from({ length: b * t }, (_, i) => (i === 0 ? 0 : i === 1 ? v - 1 : (i * 7919 + seed) % v));
  const weights = await read(tf.randomUniform([b * t], 0.5, 1.5, "float32", seed + 1));
  return { logits, targets, weights };
}

function compare(got: Result, want: Result, tol: number, label: string): void {
  for (const k of ["logp", "entropy", "grad"] as const) {
    assertFinite(got[k], `${label} ${k}`);
    const e = relErr(got[k], want[k]);
    assert.ok(e <= tol, `${label} ${k}: relative error ${e} > ${tol}`);
  }
}

for (const vocab of [1000, 4099]) {
  for (const temperature of [1, 0.7]) {
    test(`fused log-probs, entropy and gradient match the ops path and the CPU (V ${vocab}, temperature ${temperature})`, async (t) => {
      if (reason) return t.skip(reason);
      const shape: [number, number, number] = [2, 3, vocab];
      const { logits, targets, weights } = await inputs(shape, 3, vocab + temperature * 10);
      const fused = await run(true, logits, shape, targets, weights, temperature);
      const ops = await run(false, logits, shape, targets, weights, temperature);
      const cpu = await onCpu(logits, shape, targets, weights, temperature);
      compare(fused, ops, 1e-5, "fused vs webgpu ops");
      compare(fused, cpu, 1e-5, "fused vs cpu");
      // the target's gradient entry is w (1 - p) / temperature > 0, every other entry is -w p / temperature < 0
      const [, , v] = shape;
      for (let n = 0; n < targets.length; n++) assert.ok(fused.grad[n * v + targets[n]] > 0, `row ${n}: target entry positive`);
    });
  }
}

test("extreme logits (+-80) give finite values equal to the ops path", async (t) => {
  if (reason) return t.skip(reason);
  const shape: [number, number, number] = [1, 4, 1000];
  const v = shape[2];
  const logits = new Float32Array(4 * v);
  for (let i = 0; i < v; i++) {
    logits[i] = i % 3 === 0 ? 80 : -80; // row 0: a third of the vocabulary tied at the top
    logits[v + i] = i === 999 ? 80 : -80; // row 1: one-hot, the max at the last id
    logits[2 * v + i] = 80; // row 2: uniform at a large value
    logits[3 * v + i] = -80 + (i % 17) * 0.5; // row 3: all very negative
  }
  const targets = Int32Array.from([1, 999, 5, 16]);
  const weights = Float32Array.from([1, 1, 1, 1]);
  for (const temperature of [1, 0.7]) {
    const fused = await run(true, logits, shape, targets, weights, temperature);
    const ops = await run(false, logits, shape, targets, weights, temperature);
    compare(fused, ops, 1e-5, `temperature ${temperature}`);
    assert.ok(Math.abs(fused.entropy[2] - Math.log(v)) < 1e-4, `uniform row entropy ${fused.entropy[2]} = log V`);
    assert.ok(Math.abs(fused.logp[1]) < 1e-6, "a dominant target has log p 0");
  }
});

test("a target outside the vocabulary scores 0 and only the softmax flows back, as on the ops path", async (t) => {
  if (reason) return t.skip(reason);
  const shape: [number, number, number] = [1, 2, 300];
  const { logits, weights } = await inputs(shape, 2, 5);
  const targets = Int32Array.from([-1, 7]);
  const fused = await run(true, logits, shape, targets, weights, 1);
  const cpu = await onCpu(logits, shape, targets, weights, 1);
  assert.equal(fused.logp[0], 0);
  compare(fused, cpu, 1e-5, "fused vs cpu");
});

test("grids past 65,535 workgroups are folded and every row is computed", async (t) => {
  if (reason) return t.skip(reason);
  const shape: [number, number, number] = [10, 7000, 8];
  const { logits, targets, weights } = await inputs(shape, 2, 11);
  const fused = await run(true, logits, shape, targets, weights, 0.7);
  const ops = await run(false, logits, shape, targets, weights, 0.7);
  compare(fused, ops, 1e-5, "fused vs webgpu ops");
});

test("one call runs one kernel over the logits each way and keeps no [B, T, V] tensor between the passes", async (t) => {
  if (reason) return t.skip(reason);
  const shape: [number, number, number] = [2, 5, 1000];
  const big = shape[0] * shape[1] * shape[2];
  const x = tf.randomNormal(shape, 0, 1, "float32", 3) as tf.Tensor3D;
  const tg = tf.tensor2d(Int32Array.from({ length: 10 }, (_, i) => i * 97), [2, 5], "int32");
  const profileOf = async (fused: boolean) => {
    useFusedKernels(fused);
    try {
      const start = tf.memory().numBytes;
      const p = await tf.profile(() => tf.grad((z: tf.Tensor) => tf.sum(targetLogprobs(z as tf.Tensor3D, tg, 0.7, false).logp))(x));
      // tf.profile hands back the engine's one profile object, which the next profile overwrites
      const out = { kernels: p.kernels.map((k) => ({ name: k.name, outputShapes: k.outputShapes })), peakExtra: p.peakBytes - start, newBytes: p.newBytes };
      (p.result as tf.Tensor).dispose();
      return out;
    } finally {
      useFusedKernels(true);
    }
  };
  const fused = await profileOf(true);
  const ops = await profileOf(false);
  const names = fused.kernels.map((k) => k.name);
  assert.equal(names.filter((n) => n === TARGET_LOGPROBS).length, 1);
  assert.equal(names.filter((n) => n === TARGET_LOGPROBS_GRAD).length, 1);
  // kernels with a [B, T, V] output, leaving out Identity and Reshape (views of their input: no dispatch)
  const overLogits = (p: typeof fused) => p.kernels.filter((k) => !["Identity", "Reshape"].includes(k.name) && k.outputShapes.some((s) => s && s.reduce((a, b) => a * b, 1) >= big)).map((k) => k.name);
  assert.deepEqual(overLogits(fused), [TARGET_LOGPROBS_GRAD], "only the gradient itself is [B, T, V]");
  assert.ok(overLogits(ops).length >= 8, `the ops path runs ${overLogits(ops).length} kernels over the logits`);
  // the engine counts bytes per tensor, views included: the fused peak is the gradient plus the tape's view
  // of the logits (no buffer of its own) plus [3, B, T]-sized tensors; the ops path holds several more
  // [B, T, V] tensors at its peak
  assert.ok(fused.peakExtra <= 2 * 4 * big + 4096, `fused peak ${fused.peakExtra} bytes`);
  assert.ok(ops.peakExtra >= 5 * 4 * big, `ops peak ${ops.peakExtra} bytes`);
  assert.ok(fused.newBytes <= 4 * big + 4096, `fused call leaves ${fused.newBytes} bytes`);
  tf.dispose([x, tg]);
});

test("GRPO-shaped: sequence log-probs through a tiny trainable model, gradients of a masked sum match", async (t) => {
  if (reason) return t.skip(reason);
  const model = randomModel(tinyConfig({ vocabSize: 517, hiddenSize: 32, intermediateSize: 48, numLayers: 1, numHeads: 2, numKvHeads: 1, headDim: 16 }), { seed: 9 });
  const lm = new ModelTrainable(model, null);
  const ids = [
    [3, 17, 200, 9, 516, 44, 1, 88],
    [3, 17, 200, 12, 0, 301, 77, 5],
    [3, 17, 200, 400, 400, 2, 19, 250],
  ];
  const mask = tf.tensor2d([[1, 1, 1, 1, 0, 0], [1, 1, 1, 1, 1, 1], [1, 0, 1, 1, 1, 0]]);
  const vars = lm.trainableParams().map((p) => p.variable);
  const step = async (fused: boolean) => {
    useFusedKernels(fused);
    try {
      let entropy: tf.Tensor | undefined;
      const { value, grads } = tf.variableGrads(() => {
        const lp = sequenceLogprobs(lm, ids, { temperature: 0.7, entropy: true, from: 1 });
        entropy = lp.entropy;
        return tf.sum(tf.mul(lp.logp, mask)) as tf.Scalar;
      }, vars);
      const out = { value: (await value.data())[0], entropy: (await entropy!.data()) as Float32Array, grads: new Map<string, Float32Array>() };
      entropy!.dispose();
      for (const [name, g] of Object.entries(grads)) out.grads.set(name, (await g.data()) as Float32Array);
      tf.dispose([value, ...Object.values(grads)]);
      return out;
    } finally {
      useFusedKernels(true);
    }
  };
  const fused = await step(true);
  const ops = await step(false);
  assert.ok(Math.abs(fused.value - ops.value) <= 1e-4 * Math.abs(ops.value), `loss ${fused.value} vs ${ops.value}`);
  assert.ok(relErr(fused.entropy, ops.entropy) <= 1e-4, "entropies");
  assert.equal(fused.grads.size, vars.length);
  for (const [name, g] of ops.grads) {
    const e = relErr(fused.grads.get(name)!, g);
    assert.ok(e <= 1e-4, `${name}: relative error ${e}`);
  }
  mask.dispose();
  lm.dispose();
});
