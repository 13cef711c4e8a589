import { test } from "node:test";
import assert from "node:assert/strict";
import { copyFileSync, mkdirSync } from "node:fs";
import { join } from "node:path";
import { loadModel } from "../../lib/model/load.js";
import { attachAdapter, createAdapter, detachAdapter, mergedModel, saveAdapter } from "../../lib/model/lora.js";
import { readSafetensors, writeSafetensors } from "../../lib/model/safetensors.js";
import { tf } from "../../lib/backend/tf.js";
import { isT2sError } from "../../lib/core/errors.js";
import { scratchDir } from "../helpers.js";
import { fixtureDir, maxAbsDiff, readReference, type LogitsReference } from "./fixtures.js";

type AdapterRef = { unmerged: LogitsReference; merged: LogitsReference };

for (const [base, adapter] of [["llama", "llama-lora"], ["qwen2", "qwen2-lora"]] as const) {
  test(`${adapter}: unmerged and merged logits match PEFT within 1e-4`, async () => {
    const ref = readReference<AdapterRef>(adapter);
    const baseRef = readReference(base);
    const model = await loadModel(fixtureDir(base), { backend: "cpu" });
    const before = tf.memory().numTensors;
    const info = attachAdapter(model, fixtureDir(adapter), { name: "a" });
    assert.ok(info.keys.length > 0);
    for (const [i, s] of ref.unmerged.sequences.entries()) {
      const got = await model.logitsOf(s.ids, { adapter: "a" });
      const err = maxAbsDiff(s.logits, got);
      assert.ok(err < 1e-4, `unmerged seq ${i}: ${err}`);
      // the adapter must change the output (B is non-zero), and without it the base is unchanged
      assert.ok(maxAbsDiff(baseRef.sequences[i].logits, got) > 1e-2);
      const plain = await model.logitsOf(s.ids);
      assert.ok(maxAbsDiff(baseRef.sequences[i].logits, plain) < 1e-4);
    }
    const merged = await mergedModel(model, fixtureDir(adapter));
    for (const s of ref.merged.sequences) assert.ok(maxAbsDiff(s.logits, await merged.logitsOf(s.ids)) < 1e-4);
    merged.dispose();
    detachAdapter(model, "a");
    assert.equal(tf.memory().numTensors, before, "adapter tensors leaked");
    // the base weights survived the merged copy's disposal
    assert.ok(maxAbsDiff(baseRef.sequences[0].logits, await model.logitsOf(baseRef.sequences[0].ids)) < 1e-4);
    model.dispose();
  });
}

test("save then reload an adapter gives the same logits; a fresh adapter is a no-op", async () => {
  const model = await loadModel(fixtureDir("llama"), { backend: "cpu" });
  attachAdapter(model, fixtureDir("llama-lora"), { name: "orig", trainable: true });
  const out = join(scratchDir(), "saved");
  await saveAdapter(model, "orig", out);
  attachAdapter(model, out, { name: "again" });
  const ids = [3, 9, 27, 81];
  assert.ok(maxAbsDiff((await model.logitsOf(ids, { adapter: "orig" })).map((r) => Array.from(r)), await model.logitsOf(ids, { adapter: "again" })) < 1e-6);
  createAdapter(model, { name: "fresh", r: 2, alpha: 4, targetModules: ["q_proj", "v_proj"], seed: 1 });
  assert.ok(maxAbsDiff((await model.logitsOf(ids)).map((r) => Array.from(r)), await model.logitsOf(ids, { adapter: "fresh" })) === 0);
  model.dispose();
});

test("an adapter whose keys match no module is an error, not a no-op", async () => {
  const model = await loadModel(fixtureDir("qwen2"), { backend: "cpu" });
  const dir = join(scratchDir(), "bad");
  mkdirSync(dir);
  copyFileSync(join(fixtureDir("qwen2-lora"), "adapter_config.json"), join(dir, "adapter_config.json"));
  const t = readSafetensors(join(fixtureDir("qwen2-lora"), "adapter_model.safetensors"));
  const renamed = new Map([...t].map(([k, v]) => [k.replace("self_attn.q_proj", "self_attn.qkv_proj").replace("layers.1.", "layers.7."), v]));
  writeSafetensors(join(dir, "adapter_model.safetensors"), renamed);
  assert.throws(() => attachAdapter(model, dir), (e) => isT2sError(e, "adapter_mismatch") && /match no module/.test(e.message));
  const q3 = await loadModel(fixtureDir("qwen3"), { backend: "cpu" });
  assert.throws(() => attachAdapter(q3, fixtureDir("llama-lora")), (e) => isT2sError(e, "adapter_mismatch") && /another model/.test(e.message));
  q3.dispose();
  assert.equal(model.adapters.size, 0);
  model.dispose();
});

test("a pair too large to fold in at once is merged in row blocks and gives the unmerged logits", async () => {
  const model = await loadModel(fixtureDir("qwen2"), { backend: "cpu" });
  // rank 8192 on a 64-wide module: 2^25 multiply-adds, folded in blocks of 2^24
  const dir = join(scratchDir(), "high-rank");
  mkdirSync(dir);
  copyFileSync(join(fixtureDir("qwen2-lora"), "adapter_config.json"), join(dir, "adapter_config.json"));
  const tensors = new Map<string, { shape: number[]; data: Float32Array }>();
  let seed = 1;
  const noise = () => ((seed = (seed * 16807) % 2147483647) / 2147483647 - 0.5) * 1e-2;
  for (const [k, t] of readSafetensors(join(fixtureDir("qwen2-lora"), "adapter_model.safetensors"))) {
    const shape = k.includes("lora_A") ? [8192, t.shape[1]] : [t.shape[0], 8192];
    tensors.set(k, { shape, data: Float32Array.from({ length: shape[0] * shape[1] }, noise) });
  }
  writeSafetensors(join(dir, "adapter_model.safetensors"), tensors);
  attachAdapter(model, dir, { name: "wide" });
  const merged = await mergedModel(model, dir);
  const ids = [3, 9, 27, 81];
  const want = await model.logitsOf(ids, { adapter: "wide" });
  assert.ok(maxAbsDiff(want.map((r) => Array.from(r)), await merged.logitsOf(ids)) < 1e-4);
  assert.ok(maxAbsDiff(want.map((r) => Array.from(r)), await model.logitsOf(ids)) > 1e-3, "the adapter changes the output");
  merged.dispose();
  model.dispose();
});
