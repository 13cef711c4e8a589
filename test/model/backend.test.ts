import { test } from "node:test";
import assert from "node:assert/strict";
import { normalizeBackend, useBackend } from "../../lib/backend/select.js";
import { loadModel } from "../../lib/model/load.js";
import { generate } from "../../lib/model/generate.js";
import { tf } from "../../lib/backend/tf.js";
import { isT2sError } from "../../lib/core/errors.js";
import { fixtureDir, maxAbsDiff, readReference } from "./fixtures.js";

test("backend names: aliases accepted, unknown names rejected, a missing backend is an error", async () => {
  assert.equal(normalizeBackend("tfjs-node"), "tensorflow");
  assert.equal(normalizeBackend("AUTO"), "auto");
  assert.throws(() => normalizeBackend("metal"), (e) => isT2sError(e) && /unknown backend/.test(e.message));
  await assert.rejects(useBackend("tensorflow"), (e) => isT2sError(e, "backend_unavailable"));
});

test("the wasm backend also matches transformers within 1e-4 and does not leak while generating", async () => {
  const ref = readReference("qwen2");
  await useBackend("wasm");
  const initial = tf.memory().numTensors;
  const model = await loadModel(fixtureDir("qwen2"), { backend: "wasm" });
  assert.equal(model.backend, "wasm");
  assert.equal(tf.getBackend(), "wasm");
  for (const s of ref.sequences) assert.ok(maxAbsDiff(s.logits, await model.logitsOf(s.ids)) < 1e-4);
  const before = tf.memory().numTensors;
  const [g] = await generate(model, [ref.greedy.prompt], { temperature: 0, maxTokens: ref.greedy.new_ids.length, eosIds: [] });
  assert.deepEqual(g.ids, ref.greedy.new_ids);
  assert.equal(tf.memory().numTensors, before);
  model.dispose();
  // the transposed weight copies the wasm layout keeps (lib/model/layout.ts) go with the model
  assert.equal(tf.memory().numTensors, initial);
});
