import { test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { initialWeights, parameterCount, qwen2Config, writeInitialModel } from "../../lib/recipes/init.js";
import { buildTokenizer } from "../../lib/recipes/tokenizer.js";
import { loadModel } from "../../lib/model/load.js";
import { tf } from "../../lib/backend/tf.js";
import { scratchDir } from "../helpers.js";

const shape = { hiddenSize: 32, numLayers: 2, numHeads: 4, numKvHeads: 2, intermediateSize: 48, vocabSize: 300, maxPositions: 128 };

test("config: Qwen2 with tied embeddings, ChatML ids; bad head counts are errors", () => {
  const c = qwen2Config(shape);
  assert.equal(c.architecture, "Qwen2ForCausalLM");
  assert.equal(c.headDim, 8);
  assert.deepEqual(c.eosTokenIds, [2]);
  assert.throws(() => qwen2Config({ ...shape, numHeads: 3 }), /multiple/);
  assert.throws(() => qwen2Config({ ...shape, numKvHeads: 3 }), /multiple/);
  // embed 300x32 + norm 32 + per layer (2 norms 64, q 32x32+32, k,v 16x32+16 each, o 32x32, mlp 3x32x48)
  assert.equal(parameterCount(c), 300 * 32 + 32 + 2 * (64 + 1056 + 2 * 528 + 1024 + 3 * 1536));
});

test("weights: seeded, normal with the right spread, residual projections scaled, norms 1, biases 0", () => {
  const c = qwen2Config(shape);
  const a = initialWeights(c, 7);
  const b = initialWeights(c, 7);
  const other = initialWeights(c, 8);
  const e = a.get("model.embed_tokens.weight")!.data;
  assert.deepEqual(e, b.get("model.embed_tokens.weight")!.data);
  assert.notDeepEqual(e, other.get("model.embed_tokens.weight")!.data);
  const std = Math.sqrt(e.reduce((s, x) => s + x * x, 0) / e.length);
  assert.ok(Math.abs(std - 0.02) < 0.002, `std ${std}`);
  const o = a.get("model.layers.0.self_attn.o_proj.weight")!.data;
  const ostd = Math.sqrt(o.reduce((s, x) => s + x * x, 0) / o.length);
  assert.ok(ostd < 0.015, `o_proj std ${ostd}`);
  assert.ok(a.get("model.norm.weight")!.data.every((x) => x === 1));
  assert.ok(a.get("model.layers.1.self_attn.q_proj.bias")!.data.every((x) => x === 0));
});

test("the written folder loads in lib/model, gives finite logits, and is byte-identical for the same seed", async () => {
  const c = qwen2Config(shape);
  const d1 = scratchDir("t2s-init-");
  const d2 = scratchDir("t2s-init-");
  assert.equal(writeInitialModel(d1, c, 3), parameterCount(c));
  writeInitialModel(d2, c, 3);
  assert.ok(readFileSync(join(d1, "model.safetensors")).equals(readFileSync(join(d2, "model.safetensors"))));
  buildTokenizer(d1, [{ text: "SELECT name FROM pets\n", weight: 3 }], { vocabSize: 300 });
  const m = await loadModel(d1, { backend: "cpu" });
  try {
    assert.equal(m.config.hiddenSize, 32);
    const logits = m.logits(tf.tensor2d([[1, 50, 60, 70]], [1, 4], "int32") as tf.Tensor2D) as tf.Tensor;
    assert.deepEqual(logits.shape, [1, 4, 300]);
    const v = await logits.data();
    assert.ok(v.every((x) => Number.isFinite(x)));
    logits.dispose();
  } finally {
    m.dispose();
  }
});
