/**
 * Gradient checkpointing (`gradient_checkpointing`, ModelTrainable's `recompute`): recomputing each decoder
 * layer in the backward gives the gradients of keeping its activations, for LoRA pairs and for every weight
 * of full training, and the loss itself unchanged; the forward keeps fewer tensors alive on the tape.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { resolve } from "node:path";
import { tf } from "../../lib/backend/tf.js";
import { useCpu } from "./tiny-lm.js";
import { loadModel } from "../../lib/model/load.js";
import { createAdapter } from "../../lib/model/lora.js";
import { ModelTrainable } from "../../lib/train/trainable-model.js";
import { sequenceLogprobs } from "../../lib/train/logprobs.js";
import { SeededRandom } from "../../lib/core/random.js";
import { recomputedInBackward } from "../../lib/model/recompute.js";

await useCpu();
const IDS = [[5, 17, 33, 2, 90, 41, 9, 12], [7, 7, 120, 64, 3, 0, 44, 1]];

/** A weighted sum of the sequences' log-probabilities from position `from` on, and its gradients. */
function lossAndGrads(lm: ModelTrainable, ids = IDS, rows = [[0.3, -1, 0.5, 2, 1], [1, 0.2, -0.4, 0.7, -2]], from = 2): { loss: number; grads: Map<string, Float32Array> } {
  const params = lm.trainableParams();
  const weights = tf.tensor2d(rows);
  const { value, grads } = tf.variableGrads(() => tf.sum(tf.mul(sequenceLogprobs(lm, ids, { from }).logp, weights)) as tf.Scalar, params.map((p) => p.variable));
  const out = new Map<string, Float32Array>();
  for (const p of params) out.set(p.name, grads[p.variable.name].dataSync() as Float32Array);
  const loss = value.dataSync()[0];
  tf.dispose([value, weights, ...Object.values(grads)]);
  return { loss, grads: out };
}

function maxRelDiff(a: Float32Array, b: Float32Array): number {
  let d = 0;
  let s = 0;
  for (let i = 0; i < a.length; i++) {
    d = Math.max(d, Math.abs(a[i] - b[i]));
    s = Math.max(s, Math.abs(b[i]));
  }
  return s === 0 ? d : d / s;
}

for (const mode of ["lora", "full"] as const) {
  test(`recomputed layers give the same ${mode} gradients as kept activations`, async () => {
    const results = [];
    for (const recompute of [false, true]) {
      const model = await loadModel(resolve("test/fixtures/model/qwen3"), { backend: "cpu" });
      if (mode === "lora") {
        createAdapter(model, { name: "train", r: 2, alpha: 4, targetModules: ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"], seed: 1 });
      }
      const lm = new ModelTrainable(model, mode === "lora" ? "train" : null, { recompute });
      // non-zero B, so every LoRA factor has a gradient
      const rng = new SeededRandom(3);
      for (const p of lm.trainableParams()) if (p.name.includes("lora_B")) p.variable.assign(tf.tensor(Array.from({ length: p.variable.size }, () => rng.normal() * 0.2), p.variable.shape));
      results.push(lossAndGrads(lm));
      model.dispose();
    }
    const [kept, recomputed] = results;
    assert.ok(Math.abs(kept.loss - recomputed.loss) < 1e-5 * Math.abs(kept.loss), `loss ${recomputed.loss} vs ${kept.loss}`);
    assert.equal(recomputed.grads.size, kept.grads.size);
    let nonzero = 0;
    for (const [name, g] of kept.grads) {
      const r = recomputed.grads.get(name)!;
      assert.ok(maxRelDiff(r, g) < 1e-4, `${name}: relative difference ${maxRelDiff(r, g)}`);
      if (g.some((v) => v !== 0)) nonzero++;
    }
    assert.ok(nonzero > kept.grads.size / 2, "most gradients are non-zero");
  });
}

test("with recompute the tape keeps only the layers' inputs through the forward", async () => {
  const model = await loadModel(resolve("test/fixtures/model/qwen2"), { backend: "cpu" });
  createAdapter(model, { name: "train", r: 2, alpha: 4, targetModules: ["q_proj", "v_proj"], seed: 1 });
  const peak: number[] = [];
  for (const recompute of [false, true]) {
    const lm = new ModelTrainable(model, "train", { recompute });
    const vars = lm.trainableParams().map((p) => p.variable);
    let during = 0;
    const { value, grads } = tf.variableGrads(() => {
      const logits = lm.logits(IDS);
      during = tf.memory().numTensors;
      return tf.sum(logits) as tf.Scalar;
    }, vars);
    peak.push(during);
    tf.dispose([value, ...Object.values(grads)]);
  }
  assert.ok(peak[1] < peak[0], `tensors alive after the forward: ${peak[1]} with recompute, ${peak[0]} without`);
  model.dispose();
});

// rows sharing a prompt prefix (run once, its keys/values broadcast) and rows run in groups under the
// activation cap: every combination gives the plain forward's loss and gradients
const PREFIX = Array.from({ length: 20 }, (_, i) => (i * 37 + 11) % 200);
const SHARED_IDS = [[...PREFIX, 5, 17, 33, 2, 90, 41], [...PREFIX, 7, 7, 120, 64, 3, 0], [...PREFIX, 9, 8, 1, 44, 12, 6]];
for (const mode of ["lora", "full"] as const) {
  test(`a shared prompt prefix and grouped rows give the same ${mode} gradients, recomputed or kept`, async () => {
    const results: { loss: number; grads: Map<string, Float32Array>; label: string }[] = [];
    for (const [recompute, cap] of [[false, 0], [true, 0], [false, 1], [true, 1]] as const) {
      const model = await loadModel(resolve("test/fixtures/model/qwen2"), { backend: "cpu" });
      if (mode === "lora") createAdapter(model, { name: "train", r: 2, alpha: 4, targetModules: ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"], seed: 1 });
      // cap 1: one row per group; 0: the default cap, every row in one group
      const lm = new ModelTrainable(model, mode === "lora" ? "train" : null, { recompute, ...(cap ? { maxActivationElements: cap } : {}) });
      const rng = new SeededRandom(3);
      for (const p of lm.trainableParams()) if (p.name.includes("lora_B")) p.variable.assign(tf.tensor(Array.from({ length: p.variable.size }, () => rng.normal() * 0.2), p.variable.shape));
      results.push({ ...lossAndGrads(lm, SHARED_IDS, [[0.3, -1, 0.5, 2, 1], [1, 0.2, -0.4, 0.7, -2], [0.5, 0.5, -1, 1, 0.1]], PREFIX.length), label: `recompute ${recompute}, cap ${cap}` });
      model.dispose();
    }
    const [plain, ...others] = results;
    for (const r of others) {
      assert.ok(Math.abs(plain.loss - r.loss) < 1e-5 * Math.abs(plain.loss), `${r.label}: loss ${r.loss} vs ${plain.loss}`);
      for (const [name, g] of plain.grads) assert.ok(maxRelDiff(r.grads.get(name)!, g) < 1e-4, `${r.label}, ${name}: relative difference ${maxRelDiff(r.grads.get(name)!, g)}`);
    }
    // the prefix's own weights matter: the first layer's k projection has a gradient through the prefix
    assert.ok([...plain.grads.values()].some((g) => g.some((v) => v !== 0)));
  });
}

test("a recomputed function frees its output's gradient once its backward ran", () => {
  // a chain of recomputed steps: without the release, every step's output gradient lives until the whole
  // backward ends, one more x-sized tensor per step
  const x = tf.variable(tf.randomNormal([50_000], 0, 1, "float32", 7));
  const during: number[] = [];
  const step = (t: tf.Tensor) => recomputedInBackward((ins) => {
    during.push(tf.memory().numBytes);
    return tf.sin(tf.mul(ins[0], 1.5));
  }, [t], {}, []);
  const { value, grads } = tf.variableGrads(() => {
    let y: tf.Tensor = x;
    for (let i = 0; i < 6; i++) y = step(y);
    // from here on, the recomputations of the backward
    during.length = 0;
    return tf.sum(y) as tf.Scalar;
  }, [x]);
  const bytes = 50_000 * 4;
  // the six recomputations run in the backward, last step first: what is alive grows by less than one x
  assert.equal(during.length, 6);
  assert.ok(during[5] - during[0] < bytes, `alive at each recomputation: ${during.map((b) => (b / bytes).toFixed(2)).join(", ")} x`);
  tf.dispose([value, ...Object.values(grads), x]);
});

test("with recompute a shared prefix's keys and values are kept once, not once per row", async () => {
  const model = await loadModel(resolve("test/fixtures/model/qwen2"), { backend: "cpu" });
  createAdapter(model, { name: "train", r: 2, alpha: 4, targetModules: ["q_proj", "v_proj"], seed: 1 });
  const c = model.config;
  const prefix = Array.from({ length: 60 }, (_, i) => (i * 37 + 11) % 200);
  const lm = new ModelTrainable(model, "train", { recompute: true });
  const vars = lm.trainableParams().map((p) => p.variable);
  // bytes alive after the forward of `rows` rows that share the prefix and have 4 tokens each of their own
  const alive = (rows: number) => {
    const ids = Array.from({ length: rows }, (_, r) => [...prefix, 3 + r, 9, 27, 81, 5]);
    const before = tf.memory().numBytes;
    let during = 0;
    const { value, grads } = tf.variableGrads(() => {
      const lp = sequenceLogprobs(lm, ids, { from: prefix.length - 1 }).logp;
      during = tf.memory().numBytes - before;
      return tf.sum(lp) as tf.Scalar;
    }, vars);
    tf.dispose([value, ...Object.values(grads)]);
    return during;
  };
  const perRow = (alive(6) - alive(2)) / 4;
  // a copy of the prefix's keys and values per row and layer would be this much more per row
  const copies = prefix.length * 2 * c.numKvHeads * c.headDim * 4 * c.numLayers;
  assert.ok(perRow < copies, `${perRow} bytes more per row after the forward; copies of the prefix's keys and values would add ${copies}`);
  model.dispose();
});
