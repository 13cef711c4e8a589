import { test } from "node:test";
import assert from "node:assert/strict";
import { loadModel } from "../../lib/model/load.js";
import { attachAdapter } from "../../lib/model/lora.js";
import { GenerationEngine } from "../../lib/model/engine/generation-engine.js";
import type { Generation, SequenceRequest } from "../../lib/model/engine/types.js";
import { isT2sError } from "../../lib/core/errors.js";
import { tf } from "../../lib/backend/tf.js";
import { fixtureDir } from "./fixtures.js";

const system = [1, 40, 41, 42, 43, 44, 45, 46, 47, 48];
const prompt = (tail: number[]): number[] => system.concat(tail);
const sampled = (ids: number[], seed: number, extra: Partial<SequenceRequest> = {}): SequenceRequest => ({ ids, seed, temperature: 1, maxTokens: 12, prefixLength: system.length, ...extra });

async function alone(model: Awaited<ReturnType<typeof loadModel>>, req: SequenceRequest): Promise<Generation> {
  const e = await GenerationEngine.create(model, { maxBatch: 4, eosIds: [] });
  try {
    return await e.submit(req);
  } finally {
    await e.close();
  }
}

for (const backend of ["cpu", "wasm"] as const) {
  test(`${backend}: a row admitted mid-flight gets the tokens it gets alone; rows leave and join between steps`, async () => {
    const model = await loadModel(fixtureDir("qwen2"), { backend });
    const reqs = [sampled(prompt([7, 8]), 1), sampled(prompt([9]), 2, { maxTokens: 3 }), sampled(prompt([100, 101, 102]), 3), sampled(prompt([5]), 4)];
    const solo: Generation[] = [];
    for (const r of reqs) solo.push(await alone(model, r));
    const engine = await GenerationEngine.create(model, { maxBatch: 2, eosIds: [] });
    const first = [engine.submit(reqs[0]), engine.submit(reqs[1])];
    // wait until the first rows are decoding, then add more: they wait for a free slot and join mid-flight
    while (engine.metrics.steps < 2) await new Promise((r) => setImmediate(r));
    const later = [engine.submit(reqs[2]), engine.submit(reqs[3])];
    const got = await Promise.all([...first, ...later]);
    got.forEach((g, i) => {
      assert.deepEqual(g.ids, solo[i].ids, `row ${i}`);
      assert.deepEqual(g.logprobs.map((x) => x.toFixed(4)), solo[i].logprobs.map((x) => x.toFixed(4)));
    });
    assert.ok(engine.metrics.batchRows / engine.metrics.steps > 1, "rows shared decode steps");
    await engine.close();
    model.dispose();
  });
}

test("cancelling a running sequence frees its slot at the next step; queued work then runs", async () => {
  const model = await loadModel(fixtureDir("llama"), { backend: "cpu" });
  const engine = await GenerationEngine.create(model, { maxBatch: 1, eosIds: [] });
  const abort = new AbortController();
  const long = engine.submit({ ids: [1, 2, 3], maxTokens: 500, seed: 1, signal: abort.signal, onDelta: (d) => d.ids.length && engine.metrics.steps === 3 && abort.abort() });
  const queued = engine.submit({ ids: [4, 5, 6], maxTokens: 4, seed: 2 });
  assert.equal(engine.load.waiting + engine.load.running, 2);
  await assert.rejects(long, (e) => isT2sError(e, "cancelled"));
  const g = await queued;
  assert.equal(g.ids.length, 4);
  assert.equal(engine.metrics.cancelled, 1);
  assert.ok(engine.metrics.generatedTokens < 20, `the cancelled row stopped early (${engine.metrics.generatedTokens} tokens made)`);
  // an already aborted signal never takes a slot
  const pre = new AbortController();
  pre.abort();
  await assert.rejects(engine.submit({ ids: [1], signal: pre.signal }), (e) => isT2sError(e, "cancelled"));
  await engine.close();
  model.dispose();
});

test("streamed deltas concatenate to the final text, stop strings included; first come, first served", async () => {
  const model = await loadModel(fixtureDir("qwen2"), { backend: "cpu" });
  const tok = model.requireTokenizer();
  const engine = await GenerationEngine.create(model, { maxBatch: 1 });
  const ids = tok.encode("SELECT name FROM pets", { addSpecialTokens: false });
  const probe = await engine.submit({ ids, seed: 3, temperature: 1, maxTokens: 16, ignoreEos: true });
  const stop = probe.text.slice(4, 6);
  const order: number[] = [];
  const pieces: string[][] = [[], [], []];
  const runs = [0, 1, 2].map((i) =>
    engine
      .submit({ ids, seed: 3, temperature: 1, maxTokens: 16, ignoreEos: true, stop: i === 1 && stop.trim() ? [stop] : undefined, onDelta: (d) => pieces[i].push(d.text) })
      .then((g) => {
        order.push(i);
        return g;
      }),
  );
  const out = await Promise.all(runs);
  assert.deepEqual(order, [0, 1, 2]);
  out.forEach((g, i) => assert.equal(pieces[i].join(""), g.text, `row ${i}`));
  assert.equal(out[0].text, probe.text);
  if (stop.trim()) {
    assert.equal(out[1].finishReason, "stop");
    assert.ok(!out[1].text.includes(stop));
  }
  await engine.close();
  model.dispose();
});

test("min_tokens, ignore_eos, stop_token_ids, logit_bias and top logprobs", async () => {
  const model = await loadModel(fixtureDir("qwen2"), { backend: "cpu" });
  const engine = await GenerationEngine.create(model, { maxBatch: 4, eosIds: [5] });
  const greedy = await engine.submit({ ids: [1, 2, 3], temperature: 0, maxTokens: 6, ignoreEos: true, topLogprobs: 3 });
  assert.equal(greedy.topLogprobs!.length, 6);
  greedy.topLogprobs!.forEach((top, i) => {
    assert.equal(top[0].id, greedy.ids[i], "greedy picks the most likely token");
    assert.ok(top[0].logprob >= top[1].logprob && top[1].logprob >= top[2].logprob);
  });
  const first = greedy.ids[0];
  const banned = await engine.submit({ ids: [1, 2, 3], temperature: 0, maxTokens: 1, logitBias: [[first, -Infinity]] });
  assert.notEqual(banned.ids[0], first);
  const stopped = await engine.submit({ ids: [1, 2, 3], temperature: 0, maxTokens: 6, stopTokenIds: [greedy.ids[2]] });
  assert.deepEqual(stopped.ids, greedy.ids.slice(0, 3));
  assert.equal(stopped.stoppedBy, `token:${greedy.ids[2]}`);
  const forced = await engine.submit({ ids: [1, 2, 3], temperature: 0, maxTokens: 3, logitBias: [[5, 100]], minTokens: 2 });
  assert.deepEqual(forced.ids.slice(2), [5], "eos is banned for two tokens, then taken");
  assert.equal(forced.finishReason, "stop");
  await engine.close();
  model.dispose();
});

test("after the weights change, a shared prefix is recomputed; no tensors leak", async () => {
  const model = await loadModel(fixtureDir("llama"), { backend: "cpu" });
  attachAdapter(model, fixtureDir("llama-lora"), { name: "x" });
  const before = tf.memory().numTensors;
  const engine = await GenerationEngine.create(model, { maxBatch: 4, eosIds: [], adapter: "x" });
  const req = { ids: prompt([3, 4]), prefixLength: system.length, temperature: 0, maxTokens: 5 };
  const a = await engine.submit(req);
  const pair = model.weights.layers[0].q.lora!.get("x")!;
  const oldB = pair.b;
  pair.b = tf.mul(oldB, 3) as tf.Tensor2D;
  engine.weightsChanged();
  const b = await engine.submit(req);
  const fresh = await alone(model, { ...req });
  await engine.close();
  const freshX = await GenerationEngine.create(model, { maxBatch: 1, eosIds: [], adapter: "x" });
  const c = await freshX.submit(req);
  await freshX.close();
  assert.deepEqual(b.logprobs, c.logprobs, "the engine's second run equals a fresh engine's");
  assert.notDeepEqual(a.logprobs, b.logprobs);
  assert.ok(fresh.ids.length === 5);
  pair.b.dispose();
  pair.b = oldB;
  assert.equal(tf.memory().numTensors, before);
  model.dispose();
});

test("the chat layer names a missing tokenizer as such", async () => {
  const { ChatEngine } = await import("../../lib/model/chat.js");
  const { randomModel, tinyConfig } = await import("../../lib/model/random-model.js");
  const model = randomModel(tinyConfig(), { seed: 1 });
  assert.throws(() => new ChatEngine(model), (e) => isT2sError(e, "no_tokenizer"));
  model.dispose();
});
