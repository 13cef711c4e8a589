/**
 * The fused LoRA linear kernel (lib/backend/webgpu/train/lora-linear.ts) against the decoder's ops path: values
 * and the gradients of x, W, A and B on WebGPU and on the CPU, its dispatch count, and a tiny decoder with
 * an adapter on every linear layer trained through ModelTrainable (with a shared prompt prefix).
 * It needs a WebGPU adapter; without a GPU, Mesa's software Vulkan driver provides one:
 *   VK_DRIVER_FILES=/opt/lvp/lvp_icd.json XDG_RUNTIME_DIR=/tmp node scripts/run-tests.mjs test/backend/lora-linear.test.ts
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { relErr, startWebgpu } from "./kernel-support.js";
import { tf } from "../../lib/backend/tf.js";
import { useFusedKernels } from "../../lib/backend/webgpu/train/fused.js";
import { linear } from "../../lib/model/decoder.js";
import { createAdapter } from "../../lib/model/lora.js";
import { randomModel, tinyConfig } from "../../lib/model/random-model.js";
import { ModelTrainable } from "../../lib/train/trainable-model.js";
import { SeededRandom } from "../../lib/core/random.js";
import { countDispatches } from "../../bench/dispatches.js";

const reason = await startWebgpu({ gpuOnly: true });

const random = (shape: number[], seed: number): Float32Array => {
  const rng = new SeededRandom(seed);
  return Float32Array.from({ length: shape.reduce((a, b) => a * b, 1) }, () => rng.normal());
};


/** y = linear(x) with a LoRA pair, and the gradients of sum(y · r) w.r.t. x, W, A and B. */
async function run(N: number, inDim: number, out: number, r: number, scale: number, bias: boolean): Promise<Float32Array[]> {
  const t = tf.tidy(() => {
    const [x, w, a, b] = [[N, inDim], [out, inDim], [r, inDim], [out, r]].map((s, i) => tf.tensor(random(s, i + 1), s));
    const bv = tf.tensor(random([out], 9), [out]) as tf.Tensor1D;
    const rr = tf.tensor(random([N, out], 7), [N, out]);
    const f = (x: tf.Tensor, w: tf.Tensor, a: tf.Tensor, b: tf.Tensor) =>
      linear(x, { weight: w as tf.Tensor2D, bias: bias ? bv : undefined, lora: new Map([["t", { a: a as tf.Tensor2D, b: b as tf.Tensor2D, scale }]]) }, "t");
    const y = f(x, w, a, b);
    const grads = tf.grads((x: tf.Tensor, w: tf.Tensor, a: tf.Tensor, b: tf.Tensor) => tf.sum(tf.mul(f(x, w, a, b), rr)))([x, w, a, b]);
    return [y, ...grads];
  });
  const arrays = await Promise.all(t.map(async (x) => (await x.data()) as Float32Array));
  tf.dispose(t);
  return arrays;
}

test("fused LoRA linear: values and the gradients of x, W, A, B match the ops path on WebGPU and the CPU", async (t) => {
  if (reason) return t.skip(reason);
  for (const [N, inDim, out, r, scale, bias] of [[37, 45, 29, 4, 2, true], [130, 96, 200, 16, 0.5, false], [1, 64, 64, 8, 1, false]] as const) {
    useFusedKernels(true);
    const fused = await run(N, inDim, out, r, scale, bias);
    useFusedKernels(false);
    const gpuOps = await run(N, inDim, out, r, scale, bias);
    useFusedKernels(true);
    await tf.setBackend("cpu");
    const cpuOps = await run(N, inDim, out, r, scale, bias);
    await tf.setBackend("webgpu");
    ["y", "dx", "dW", "dA", "dB"].forEach((name, k) => {
      for (const [ref, where] of [[gpuOps[k], "webgpu ops"], [cpuOps[k], "cpu ops"]] as const) {
        const e = relErr(fused[k], ref);
        assert.ok(e < 2e-5, `${N}x${inDim}->${out} r${r} ${name} vs ${where}: relative error ${e}`);
      }
    });
  }
});

test("fused LoRA linear: three dispatches forward, against five through tfjs ops", async (t) => {
  if (reason) return t.skip(reason);
  const [x, w, a, b] = [[300, 64], [96, 64], [8, 64], [96, 8]].map((s, i) => tf.tensor(random(s, i + 1), s));
  const layer = { weight: w as tf.Tensor2D, lora: new Map([["t", { a: a as tf.Tensor2D, b: b as tf.Tensor2D, scale: 2 }]]) };
  const count = async (on: boolean) => {
    useFusedKernels(on);
    const { result, dispatches } = await countDispatches(async () => linear(x, layer, "t"));
    result.dispose();
    useFusedKernels(true);
    return dispatches;
  };
  assert.equal(await count(true), 3);
  assert.equal(await count(false), 5);
  tf.dispose([x, w, a, b]);
});

/** Logits of rows sharing a prompt prefix and the gradients of a loss w.r.t. every LoRA weight. */
async function adapterRun(fused: boolean): Promise<{ logits: Float32Array; grads: Map<string, Float32Array> }> {
  useFusedKernels(fused);
  try {
    const c = tinyConfig({ vocabSize: 96, hiddenSize: 40, intermediateSize: 72, numLayers: 2, numHeads: 4, numKvHeads: 2, headDim: 10, attentionBias: true });
    const model = randomModel(c, { seed: 7, name: `lora-${fused ? "fused" : "ops"}` });
    createAdapter(model, { name: "train", r: 4, alpha: 8, targetModules: ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"], seed: 3 });
    const lm = new ModelTrainable(model, "train");
    const params = lm.trainableParams();
    // B starts at zero; move it (to a trained adapter's scale) so the LoRA branch contributes to the forward too
    params.forEach((p, i) => p.variable.assign(tf.mul(tf.tensor(random(p.variable.shape, 40 + i), p.variable.shape), 0.1)));
    const prefix = Array.from({ length: 18 }, (_, i) => (i * 7) % 90 + 3);
    const ids = [[...prefix, 5, 17, 33, 2], [...prefix, 12, 60, 3, 8]];
    const from = 17;
    const r = tf.tensor(random([2, 22 - from, 96], 11), [2, 22 - from, 96]);
    const logits = tf.tidy(() => lm.logits(ids, { from }));
    const { grads } = tf.variableGrads(() => tf.sum(tf.mul(lm.logits(ids, { from }), r)) as tf.Scalar, params.map((p) => p.variable));
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

test("a tiny decoder with LoRA on every linear layer and a shared prefix: logits and LoRA gradients, fused vs ops, within 1e-4", async (t) => {
  if (reason) return t.skip(reason);
  const fused = await adapterRun(true);
  const opsRun = await adapterRun(false);
  assert.ok(relErr(fused.logits, opsRun.logits) < 1e-4, `logits: ${relErr(fused.logits, opsRun.logits)}`);
  assert.equal(fused.grads.size, 28);
  for (const [name, g] of opsRun.grads) {
    const e = relErr(fused.grads.get(name)!, g);
    assert.ok(e < 1e-4, `${name}: relative error ${e}`);
  }
});
