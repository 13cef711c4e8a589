import { test } from "node:test";
import assert from "node:assert/strict";
import { useBackend } from "../../lib/backend/select.js";
import { disposeCache, selectCacheRows, shareCache, type KvCache, type StepInput } from "../../lib/model/decoder.js";
import { generate, type GenerateStats } from "../../lib/model/generate.js";
import { loadModel } from "../../lib/model/load.js";
import type { CausalLM } from "../../lib/model/model.js";
import { randomModel, tinyConfig } from "../../lib/model/random-model.js";
import { tf } from "../../lib/backend/tf.js";
import { fixtureDir } from "./fixtures.js";

const PREFIX = [1, 40, 41, 42, 43, 44, 45, 46, 47, 48, 49];
const SUFFIXES = [[7], [9, 10, 11, 12, 13], [100, 101], [60, 61, 62]];

/** Left-padded suffixes after a prefix of `p` tokens, each token at its absolute position. */
function suffixInput(suffixes: number[][], p: number): StepInput {
  const L = Math.max(...suffixes.map((s) => s.length));
  return {
    ids: suffixes.map((s) => [...new Array<number>(L - s.length).fill(0), ...s]),
    positions: suffixes.map((s) => Array.from({ length: L }, (_, i) => Math.max(0, p + i - (L - s.length)))),
    valid: suffixes.map((s) => Array.from({ length: L }, (_, i) => i >= L - s.length)),
  };
}

async function maxDiff(a: tf.Tensor, b: tf.Tensor): Promise<number> {
  assert.deepEqual(a.shape, b.shape);
  const x = (await a.data()) as Float32Array;
  const y = (await b.data()) as Float32Array;
  let m = 0;
  for (let i = 0; i < x.length; i++) m = Math.max(m, Math.abs(x[i] - y[i]));
  return m;
}

/**
 * Runs the prefix once, then the same suffix step and decode steps (dropping row 1 after the first) on a tiled
 * full cache and on a shared-prefix cache; returns the largest logit difference seen.
 */
async function compareCaches(model: CausalLM, chunkScores?: number): Promise<number> {
  const first = model.step({ ids: [PREFIX], positions: [PREFIX.map((_, i) => i)], valid: [PREFIX.map(() => true)] }, null, { lastOnly: true });
  first.logits.dispose();
  let tiled: KvCache = selectCacheRows(first.cache, SUFFIXES.map(() => 0));
  let shared: KvCache = shareCache(first.cache, SUFFIXES.length);
  disposeCache(first.cache);
  let rows = SUFFIXES.map((s, i) => ({ next: 200 + i, pos: PREFIX.length + s.length }));
  let worst = 0;
  const input = suffixInput(SUFFIXES, PREFIX.length);
  for (let step = 0; step < 4; step++) {
    const stepInput: StepInput =
      step === 0 ? input : { ids: rows.map((r) => [r.next]), positions: rows.map((r) => [r.pos + step - 1]), valid: rows.map(() => [true]) };
    const a = model.step(stepInput, tiled, { chunkScores });
    const b = model.step(stepInput, shared, { chunkScores });
    // the cache a step grew from is released as generate does, so the shared part must outlive it
    disposeCache(tiled);
    disposeCache(shared);
    tiled = a.cache;
    shared = b.cache;
    assert.equal(shared.shared?.length, PREFIX.length);
    assert.equal(shared.valid[0].length, tiled.valid[0].length - PREFIX.length);
    worst = Math.max(worst, await maxDiff(a.logits, b.logits));
    a.logits.dispose();
    b.logits.dispose();
    if (step === 1) {
      const keep = [0, 2, 3];
      const t2 = selectCacheRows(tiled, keep);
      const s2 = selectCacheRows(shared, keep);
      disposeCache(tiled);
      disposeCache(shared);
      tiled = t2;
      shared = s2;
      rows = keep.map((k) => rows[k]);
    }
  }
  disposeCache(tiled);
  disposeCache(shared);
  return worst;
}

for (const backend of ["cpu", "wasm"] as const) {
  test(`${backend}: a shared-prefix cache gives the logits of a tiled cache (prompt step, decode steps, dropped rows); no leak`, async () => {
    await useBackend(backend);
    const models: [string, CausalLM][] = [
      ["qwen3", await loadModel(fixtureDir("qwen3"), { backend })],
      ["llama", await loadModel(fixtureDir("llama"), { backend })],
      ["one kv head", randomModel(tinyConfig({ numKvHeads: 1 }), { seed: 3, backend })],
    ];
    for (const [name, model] of models) {
      await model.logitsOf([1, 2]); // on wasm the first use keeps transposed weight copies (until dispose)
      const before = tf.memory().numTensors;
      const d = await compareCaches(model);
      assert.ok(d < 1e-4, `${name}: logits differ by ${d}`);
      // queries split into chunks of one take the same path per chunk
      const dc = await compareCaches(model, 1);
      assert.ok(dc < 1e-4, `${name} (chunked): logits differ by ${dc}`);
      assert.equal(tf.memory().numTensors, before, `${name}: tensors leaked`);
      model.dispose();
    }
  });

  test(`${backend}: generate with the shared prefix samples what the unshared path samples; rows end at different times`, async () => {
    await useBackend(backend);
    const model = await loadModel(fixtureDir("qwen2"), { backend });
    const prompts = SUFFIXES.map((s, i) => ({ ids: PREFIX.concat(s), maxTokens: 3 + 2 * i }));
    await model.logitsOf([1, 2]);
    const before = tf.memory().numTensors;
    const on: GenerateStats = { prefixTokens: 0, steps: 0 };
    const off: GenerateStats = { prefixTokens: 0, steps: 0 };
    for (const temperature of [0, 1]) {
      const a = await generate(model, prompts, { temperature, seed: 5, eosIds: [] }, on);
      const b = await generate(model, prompts, { temperature, seed: 5, eosIds: [], sharePrefix: false }, off);
      assert.equal(on.prefixTokens, PREFIX.length);
      assert.equal(off.prefixTokens, 0);
      a.forEach((g, i) => {
        assert.equal(g.ids.length, prompts[i].maxTokens);
        assert.deepEqual(g.ids, b[i].ids, `temperature ${temperature}, row ${i}`);
        g.logprobs.forEach((lp, j) => assert.ok(Math.abs(lp - b[i].logprobs[j]) < 1e-4, `row ${i} token ${j}: ${lp} vs ${b[i].logprobs[j]}`));
      });
    }
    assert.equal(tf.memory().numTensors, before, "generation leaked tensors");
    model.dispose();
  });
}

test("the shared part lives until the last cache holding it is disposed", async () => {
  await useBackend("cpu");
  const model = randomModel(tinyConfig(), { seed: 2 });
  const first = model.step({ ids: [[1, 2, 3]], positions: [[0, 1, 2]], valid: [[true, true, true]] }, null);
  first.logits.dispose();
  const cache = shareCache(first.cache, 2);
  disposeCache(first.cache);
  const shared = cache.shared!;
  const grown = model.step({ ids: [[4], [5]], positions: [[3], [3]], valid: [[true], [true]] }, cache);
  grown.logits.dispose();
  const one = selectCacheRows(grown.cache, [1]);
  assert.equal(shared.refs, 3);
  assert.throws(() => shareCache(one, 2), RangeError);
  disposeCache(cache);
  disposeCache(cache);
  disposeCache(grown.cache);
  assert.equal(shared.refs, 1, "a cache disposed twice gave up its reference twice");
  assert.ok(shared.keys.flat().every((t) => !t.isDisposed), "shared keys disposed while a cache still holds them");
  disposeCache(one);
  assert.equal(shared.refs, 0);
  assert.ok([...shared.keys.flat(), ...shared.values.flat()].every((t) => t.isDisposed));
  model.dispose();
});
