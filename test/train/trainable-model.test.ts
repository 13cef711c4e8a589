import { test } from "node:test";
import assert from "node:assert/strict";
import { cpSync, existsSync, readFileSync, writeFileSync } from "node:fs";
import { join, resolve } from "node:path";
import * as tf from "@tensorflow/tfjs-core";
import { assertClose, finiteDiff, useCpu } from "./tiny-lm.js";
import { loadModel } from "../../lib/model/load.js";
import { createAdapter, attachAdapter, saveAdapter } from "../../lib/model/lora.js";
import { expectedShapes } from "../../lib/model/load.js";
import { ModelTrainable } from "../../lib/train/trainable-model.js";
import { sequenceLogprobs } from "../../lib/train/logprobs.js";
import { policyLoss } from "../../lib/train/losses.js";
import { SftTrainer } from "../../lib/train/sft.js";
import { scratchDir } from "../helpers.js";
import { SeededRandom } from "../../lib/core/random.js";

await useCpu();
const QWEN2 = resolve("test/fixtures/model/qwen2");
const IDS = [[5, 17, 33, 2, 90, 41], [7, 7, 120, 64, 3, 0]];
const IDS_T = tf.tensor2d(IDS, undefined, "int32");
const MASK = tf.tensor2d([[0, 0, 1, 1, 1], [0, 1, 1, 1, 0]]);

test("LoRA parameters of the real decoder get finite-difference-exact GRPO gradients", async () => {
  const model = await loadModel(QWEN2, { backend: "cpu" });
  createAdapter(model, { name: "train", r: 2, alpha: 4, targetModules: ["q_proj", "v_proj", "down_proj"], seed: 1 });
  const lm = new ModelTrainable(model, "train");
  const params = lm.trainableParams();
  assert.equal(params.length, 2 * 3 * 2, "A and B for 3 modules x 2 layers");
  assert.match(params[0].name, /^base_model\.model\.model\.layers\.0\.self_attn\.q_proj\.lora_A\.weight$/);
  // B starts at zero (a no-op adapter): the reference and the policy agree
  const same = tf.tidy(() => tf.max(tf.abs(tf.sub(lm.logits(IDS), lm.logits(IDS, { reference: true })))).dataSync()[0]);
  assert.equal(same, 0);
  const rng = new SeededRandom(3);
  for (const p of params) if (p.name.includes("lora_B")) p.variable.assign(tf.tensor(Array.from({ length: p.variable.size }, () => rng.normal() * 0.2), p.variable.shape));
  const viaModel = tf.tidy(() => tf.max(tf.abs(tf.sub(lm.logits(IDS), model.logits(IDS_T, { adapter: "train" })))).dataSync()[0]);
  assert.equal(viaModel, 0, "the trainer's logits are CausalLM.logits with the adapter");
  const ranged = tf.tidy(() => tf.max(tf.abs(tf.sub(lm.logits(IDS, { from: 3 }), tf.slice(lm.logits(IDS), [0, 3, 0], [-1, -1, -1])))).dataSync()[0]);
  assert.ok(ranged < 1e-5, `logits from position 3 match the full logits (${ranged})`);
  const old = tf.keep(tf.tidy(() => tf.add(sequenceLogprobs(lm, IDS).logp, tf.tensor2d([[0, 0, 0.05, -0.4, 0.02], [0, 0.3, -0.05, 0.01, 0]]))));
  const ref = tf.keep(tf.tidy(() => sequenceLogprobs(lm, IDS, { reference: true }).logp));
  const settings = { lossType: "grpo" as const, epsilonLow: 0.2, epsilonHigh: 0.28, beta: 0.1 };
  const counts = { sequences: 2, tokens: 6, microBatches: 1, maxCompletionLength: 5 };
  const loss = () => {
    const r = policyLoss({ logp: tf.concat([tf.zeros([2, 1]), sequenceLogprobs(lm, IDS, { from: 1 }).logp], 1) as tf.Tensor2D, oldLogp: old as tf.Tensor2D, refLogp: ref as tf.Tensor2D, advantages: tf.tensor1d([1.2, -0.7]), mask: MASK }, settings, counts);
    tf.dispose(Object.values(r.sums));
    return r.loss;
  };
  const { grads } = tf.variableGrads(loss, params.map((p) => p.variable));
  const value = () => tf.tidy(() => loss().dataSync()[0]);
  let nonzero = 0;
  for (const p of [params[0], params[1], params[10], params[11]]) {
    const g = grads[p.variable.name].dataSync();
    for (const i of [0, 7, 31]) {
      const fd = finiteDiff(value, p.variable, i, 1e-2);
      assertClose(g[i], fd, 2e-3, 5e-2, `${p.name}[${i}]`);
      if (Math.abs(g[i]) > 1e-3) nonzero++;
    }
  }
  assert.ok(nonzero >= 4, "some gradients are clearly non-zero");
  tf.dispose([old, ref, ...Object.values(grads)]);
  model.dispose();
});

test("checkpoints of an adapter are PEFT folders that lib/model attaches", async () => {
  const model = await loadModel(QWEN2, { backend: "cpu" });
  createAdapter(model, { name: "train", r: 2, alpha: 4, targetModules: ["q_proj", "v_proj"], seed: 1 });
  const lm = new ModelTrainable(model, "train");
  const out = scratchDir();
  const examples = [{ ids: [5, 17, 33, 2, 90], mask: [0, 0, 1, 1, 1] }, { ids: [7, 8, 9, 10], mask: [0, 0, 1, 1] }];
  const t = new SftTrainer(lm, examples, { batchSize: 2, steps: 2, lr: 0.01, seed: 1, outDir: out, checkpointFiles: () => lm.checkpointFiles() });
  const recs = await t.train();
  assert.ok((recs[1].loss as number) < (recs[0].loss as number));
  const dir = join(out, "checkpoints", "step-000002");
  assert.ok(existsSync(join(dir, "adapter_model.safetensors")));
  const cfg = JSON.parse(readFileSync(join(dir, "adapter_config.json"), "utf8"));
  assert.equal(cfg.peft_type, "LORA");
  assert.equal(cfg.r, 2);
  // attaching the checkpoint gives the trained adapter's logits
  const info = attachAdapter(model, dir, { name: "reloaded" });
  assert.equal(info.r, 2);
  const diff = tf.tidy(() => tf.max(tf.abs(tf.sub(model.logits(IDS_T, { adapter: "train" }), model.logits(IDS_T, { adapter: "reloaded" })))).dataSync()[0]);
  assert.ok(diff < 1e-5, `reloaded adapter differs by ${diff}`);
  t.dispose();
  model.dispose();
});

test("a checkpoint's adapter_config.json is the one saveAdapter writes, lora_dropout included", async () => {
  const model = await loadModel(QWEN2, { backend: "cpu" });
  const init = join(scratchDir(), "init");
  cpSync(resolve("test/fixtures/model/qwen2-lora"), init, { recursive: true });
  const cfgFile = join(init, "adapter_config.json");
  writeFileSync(cfgFile, JSON.stringify({ ...JSON.parse(readFileSync(cfgFile, "utf8")), lora_dropout: 0.05 }));
  attachAdapter(model, init, { name: "train", trainable: true });
  const lm = new ModelTrainable(model, "train");
  const saved = join(scratchDir(), "saved");
  await saveAdapter(model, "train", saved);
  const written = JSON.parse(readFileSync(join(saved, "adapter_config.json"), "utf8"));
  assert.equal(written.lora_dropout, 0.05);
  assert.deepEqual(lm.checkpointFiles().extraFiles?.["adapter_config.json"], written);
  model.dispose();
});

test("full-weight training names every weight as the checkpoint does and updates it", async () => {
  const model = await loadModel(QWEN2, { backend: "cpu" });
  const lm = new ModelTrainable(model, null);
  const names = lm.trainableParams().map((p) => p.name).sort();
  assert.deepEqual(names, [...expectedShapes(model.config).keys()].sort());
  assert.equal(lm.hasReference, false);
  const before = lm.trainableParams()[0].variable.dataSync().slice();
  const out = scratchDir();
  const t = new SftTrainer(lm, [{ ids: [5, 17, 33, 2], mask: [0, 1, 1, 1] }], { batchSize: 1, steps: 1, lr: 0.01, seed: 1, outDir: out, checkpointFiles: () => lm.checkpointFiles() });
  await t.train();
  const after = lm.trainableParams()[0].variable.dataSync();
  assert.ok(after.some((x, i) => x !== before[i]));
  // the checkpoint is a model folder lib/model loads, with the trained weights
  const reloaded = await loadModel(join(out, "checkpoints", "step-000001"), { backend: "cpu" });
  const diff = tf.tidy(() => tf.max(tf.abs(tf.sub(reloaded.logits(IDS_T), lm.logits(IDS)))).dataSync()[0]);
  assert.ok(diff < 1e-5, `reloaded full checkpoint differs by ${diff}`);
  reloaded.dispose();
  t.dispose();
  model.dispose();
});

test("rows sharing a long prompt prefix get the same logits and gradients when the prefix runs once", async () => {
  const model = await loadModel(QWEN2, { backend: "cpu" });
  const lm = new ModelTrainable(model, null);
  const prefix = Array.from({ length: 20 }, (_, i) => (i * 13 + 4) % 100);
  const rows = [[...prefix, 5, 9, 11, 2], [...prefix, 8, 1, 0, 0], [...prefix, 3, 3, 7, 30]];
  const from = 20;
  // one row at a time never shares a prefix: the plain path, run per row and stacked
  const separate = () => tf.concat(rows.map((r) => lm.logits([r], { from })), 0);
  const diff = tf.tidy(() => tf.max(tf.abs(tf.sub(lm.logits(rows, { from }), separate()))).dataSync()[0]);
  assert.ok(diff < 1e-4, `shared-prefix logits match (${diff})`);
  const weights = tf.randomNormal([3, rows[0].length - from, model.config.vocabSize], 0, 1, "float32", 5);
  const vars = lm.trainableParams().map((p) => p.variable);
  const gShared = tf.variableGrads(() => tf.sum(tf.mul(lm.logits(rows, { from }), weights)), vars).grads;
  const gSeparate = tf.variableGrads(() => tf.sum(tf.mul(separate(), weights)), vars).grads;
  let worst = 0;
  let largest = 0;
  for (const v of vars) {
    worst = Math.max(worst, tf.tidy(() => tf.max(tf.abs(tf.sub(gShared[v.name], gSeparate[v.name]))).dataSync()[0]));
    largest = Math.max(largest, tf.tidy(() => tf.max(tf.abs(gSeparate[v.name])).dataSync()[0]));
  }
  assert.ok(largest > 1e-2, "the gradients are not trivially zero");
  assert.ok(worst < 1e-3 * largest, `gradients match (worst difference ${worst}, largest gradient ${largest})`);
  tf.dispose([weights, ...Object.values(gShared), ...Object.values(gSeparate)]);
  lm.dispose();
  model.dispose();
});
