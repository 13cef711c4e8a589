/**
 * Automatic prefix caching through the generation engine on the CPU runner (cpu and wasm backends): later
 * requests copy the stored blocks of earlier prompts (across prefill calls and within one), the engine
 * counts the tokens looked up and found, the tokens and log-probabilities equal those of caching off, and
 * a weight change drops what was stored.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { loadModel } from "../../lib/model/load.js";
import { GenerationEngine } from "../../lib/model/engine/generation-engine.js";
import type { EngineMetrics } from "../../lib/model/engine/types.js";
import type { Generation, SequenceRequest } from "../../lib/model/engine/types.js";
import { tf } from "../../lib/backend/tf.js";
import { fixtureDir } from "./fixtures.js";

const SYSTEM = Array.from({ length: 37 }, (_, i) => (i * 13 + 5) % 300);
const question = (k: number, n: number): number[] => Array.from({ length: n }, (_, i) => (k * 31 + i * 17 + 3) % 300);

/** Requests in the order they are sent: waves of requests sent together, one wave after the other. */
const WAVES: SequenceRequest[][] = [
  [{ ids: [...SYSTEM, ...question(1, 20)], prefixLength: SYSTEM.length }],
  // the same system part, another question: the stored system blocks and past them, recomputed
  [{ ids: [...SYSTEM, ...question(2, 9)], prefixLength: SYSTEM.length, temperature: 1, seed: 3 }],
  // the first prompt again, and extended by a turn (an episode's next turn)
  [{ ids: [...SYSTEM, ...question(1, 20)], prefixLength: SYSTEM.length }, { ids: [...SYSTEM, ...question(1, 20), ...question(7, 30)], prefixLength: SYSTEM.length }],
  // a group of samples of one new prompt in one call: the first computes it, the others copy from it
  [0, 1, 2].map((i) => ({ ids: [...SYSTEM, ...question(4, 25)], prefixLength: SYSTEM.length, temperature: 1, seed: 8, sampleIndex: i })),
  // a prompt with no shared part declared, twice
  [{ ids: question(9, 40), prefixLength: 0 }],
  [{ ids: question(9, 40), prefixLength: 0, temperature: 1, seed: 2 }],
];

async function run(model: Awaited<ReturnType<typeof loadModel>>, enablePrefixCaching: boolean): Promise<{ out: Generation[]; metrics: EngineMetrics; afterDrop: EngineMetrics }> {
  const engine = await GenerationEngine.create(model, { maxBatch: 4, eosIds: [], enablePrefixCaching });
  try {
    const out: Generation[] = [];
    for (const wave of WAVES) out.push(...(await Promise.all(wave.map((r) => engine.submit({ temperature: 0, maxTokens: 5, ...r })))));
    const metrics = { ...engine.metrics };
    // a training step: nothing stored before it may be used after it
    engine.weightsChanged();
    await engine.submit({ ...WAVES[0][0], maxTokens: 2 });
    return { out, metrics, afterDrop: { ...engine.metrics } };
  } finally {
    await engine.close();
  }
}

for (const backend of ["cpu", "wasm"] as const) {
  test(`${backend}: prefix caching copies stored prompt blocks and gives exactly the tokens and logprobs of caching off`, async () => {
    const model = await loadModel(fixtureDir("qwen2"), { backend });
    await model.logitsOf([1, 2]); // wasm keeps transposed weight copies from the first use
    const before = tf.memory().numTensors;
    const on = await run(model, true);
    const off = await run(model, false);
    assert.equal(tf.memory().numTensors, before, "tensors leaked");
    on.out.forEach((g, i) => {
      assert.deepEqual(g.ids, off.out[i].ids, `row ${i}`);
      assert.deepEqual(g.logprobs, off.out[i].logprobs, `row ${i}`);
    });
    const prompts = WAVES.flat().reduce((n, r) => n + r.ids.length, 0);
    assert.equal(on.metrics.prefixCacheQueries, prompts);
    // wave 2: the system part (37, declared); wave 3: the stored first prompt's 3 full blocks, twice;
    // wave 4: the system part for the first row, its 3 full blocks for the two others; wave 6: 2 blocks
    const expected = 37 + 48 + 48 + 37 + 2 * 48 + 32;
    assert.equal(on.metrics.prefixCacheHits, expected);
    assert.equal(off.metrics.prefixCacheQueries, 0);
    assert.equal(off.metrics.prefixCacheHits, 0);
    assert.equal(on.afterDrop.prefixCacheHits, on.metrics.prefixCacheHits, "a weight change dropped the stored prefixes");
    model.dispose();
  });
}
