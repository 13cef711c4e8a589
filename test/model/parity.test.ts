import { test } from "node:test";
import assert from "node:assert/strict";
import { loadModel } from "../../lib/model/load.js";
import { tf } from "../../lib/backend/tf.js";
import { ARCH_FIXTURES, fixtureDir, maxAbsDiff, readReference } from "./fixtures.js";

for (const name of ARCH_FIXTURES) {
  test(`${name}: fp32 logits match transformers within 1e-4`, async () => {
    const ref = readReference(name);
    const model = await loadModel(fixtureDir(name), { backend: "cpu" });
    assert.equal(model.config.architecture, ref.architecture);
    const before = tf.memory().numTensors;
    for (const s of ref.sequences) {
      const got = await model.logitsOf(s.ids);
      const err = maxAbsDiff(s.logits, got);
      assert.ok(err < 1e-4, `${name} seq of ${s.ids.length}: max abs error ${err}`);
    }
    assert.equal(tf.memory().numTensors, before, "logitsOf leaked tensors");
    model.dispose();
  });
}

test("logits() gives the same values as logitsOf for a right-padded batch", async () => {
  const ref = readReference("qwen2");
  const model = await loadModel(fixtureDir("qwen2"), { backend: "cpu" });
  const [a, b] = [ref.sequences[1], ref.sequences[2]];
  const T = b.ids.length;
  const ids = tf.tensor2d([a.ids.concat(new Array(T - a.ids.length).fill(0)), b.ids], [2, T], "int32");
  const out = model.logits(ids);
  assert.deepEqual(out.shape, [2, T, model.config.vocabSize]);
  const rows = (await out.array()) as number[][][];
  assert.ok(maxAbsDiff(a.logits, rows[0].slice(0, a.ids.length)) < 1e-4);
  assert.ok(maxAbsDiff(b.logits, rows[1]) < 1e-4);
  tf.dispose([ids, out]);
  model.dispose();
});

test("long prompts attend in query chunks with the same logits", async () => {
  const ref = readReference("qwen3");
  const model = await loadModel(fixtureDir("qwen3"), { backend: "cpu" });
  const s = ref.sequences[2];
  const T = s.ids.length;
  const input = { ids: [s.ids], positions: [s.ids.map((_, i) => i)], valid: [s.ids.map(() => true)] };
  // room for 7 query rows of all heads at once: the 40 queries go in 6 chunks
  const out = model.step(input, null, { chunkScores: 7 * model.config.numHeads * T });
  const rows = (await out.logits.array()) as number[][][];
  assert.ok(maxAbsDiff(s.logits, rows[0]) < 1e-4);
  tf.dispose([out.logits, ...out.cache.keys, ...out.cache.values]);
  model.dispose();
});
