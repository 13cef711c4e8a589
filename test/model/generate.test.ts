import { test } from "node:test";
import assert from "node:assert/strict";
import { loadModel } from "../../lib/model/load.js";
import { attachAdapter } from "../../lib/model/lora.js";
import { generate, type GenerateStats, type Generation } from "../../lib/model/generate.js";
import { tf } from "../../lib/backend/tf.js";
import { ARCH_FIXTURES, fixtureDir, readReference, type LogitsReference } from "./fixtures.js";

for (const name of ARCH_FIXTURES) {
  test(`${name}: cached greedy decoding reproduces the full-recompute greedy of transformers`, async () => {
    const ref = readReference(name);
    const model = await loadModel(fixtureDir(name), { backend: "cpu" });
    const [g] = await generate(model, [ref.greedy.prompt], { temperature: 0, maxTokens: ref.greedy.new_ids.length, eosIds: [] });
    assert.deepEqual(g.ids, ref.greedy.new_ids);
    assert.equal(g.finishReason, "length");
    model.dispose();
  });
}

test("greedy with an unmerged adapter matches PEFT's greedy", async () => {
  const ref = readReference<{ unmerged: LogitsReference }>("llama-lora");
  const model = await loadModel(fixtureDir("llama"), { backend: "cpu" });
  attachAdapter(model, fixtureDir("llama-lora"), { name: "x" });
  const [g] = await generate(model, [ref.unmerged.greedy.prompt], { temperature: 0, maxTokens: 12, eosIds: [], adapter: "x" });
  assert.deepEqual(g.ids, ref.unmerged.greedy.new_ids);
  model.dispose();
});

test("a batch of different lengths with a shared prefix equals each prompt run alone; no tensors leak", async () => {
  const model = await loadModel(fixtureDir("qwen3"), { backend: "cpu" });
  const system = [1, 40, 41, 42, 43, 44, 45, 46];
  const prompts = [system.concat([7]), system.concat([9, 10, 11, 12, 13]), system.concat([100, 101]), [5, 6, 7]];
  const before = tf.memory().numTensors;
  const alone: Generation[] = [];
  for (const p of prompts) alone.push((await generate(model, [p], { temperature: 0, maxTokens: 6, eosIds: [] }))[0]);
  const stats: GenerateStats = { prefixTokens: 0, steps: 0 };
  const batch = await generate(model, prompts.slice(0, 3), { temperature: 0, maxTokens: 6, eosIds: [] }, stats);
  assert.equal(stats.prefixTokens, system.length);
  batch.forEach((g, i) => {
    assert.deepEqual(g.ids, alone[i].ids);
    g.logprobs.forEach((lp, j) => assert.ok(Math.abs(lp - alone[i].logprobs[j]) < 1e-4));
  });
  const mixed = await generate(model, prompts, { temperature: 0, maxTokens: 6, eosIds: [] });
  mixed.forEach((g, i) => assert.deepEqual(g.ids, alone[i].ids));
  assert.equal(tf.memory().numTensors, before, "generation leaked tensors");
  model.dispose();
});

test("seeded sampling is deterministic; top-k 1 is greedy; rows stop on eos, stop strings and length", async () => {
  const model = await loadModel(fixtureDir("qwen2"), { backend: "cpu" });
  const tok = model.requireTokenizer();
  const prompt = tok.encode("SELECT name FROM");
  const a = await generate(model, [prompt, prompt, prompt], { temperature: 1, topP: 0.9, seed: 3, maxTokens: 10 });
  const b = await generate(model, [prompt, prompt, prompt], { temperature: 1, topP: 0.9, seed: 3, maxTokens: 10 });
  assert.deepEqual(a.map((g) => g.ids), b.map((g) => g.ids));
  assert.notDeepEqual(a[0].ids, a[1].ids, "samples of one prompt should differ");
  const c = await generate(model, [prompt], { temperature: 1, seed: 4, maxTokens: 10 });
  assert.notDeepEqual(c[0].ids, a[0].ids);
  for (const g of a) for (const lp of g.logprobs) assert.ok(lp <= 0 && Number.isFinite(lp));
  const greedy = await generate(model, [prompt], { temperature: 0, maxTokens: 8, eosIds: [] });
  const top1 = await generate(model, [prompt], { temperature: 0.7, topK: 1, seed: 9, maxTokens: 8, eosIds: [] });
  assert.deepEqual(top1[0].ids, greedy[0].ids);
  // eos: make the first greedy token the eos id
  const first = greedy[0].ids[0];
  const [e] = await generate(model, [prompt], { temperature: 0, maxTokens: 8, eosIds: [first] });
  assert.equal(e.finishReason, "stop");
  assert.equal(e.stoppedBy, "eos");
  assert.deepEqual(e.ids, [first]);
  assert.equal(e.text, "");
  // stop string: a piece of the greedy text
  const full = greedy[0].text;
  assert.ok(full.length >= 3, `greedy text too short: ${JSON.stringify(full)}`);
  const stop = full.slice(2, 4);
  const pieces: string[] = [];
  const [s] = await generate(model, [{ ids: prompt, stop: [stop] }, prompt], { temperature: 0, maxTokens: 8, eosIds: [], onText: (row, d) => row === 0 && pieces.push(d) });
  assert.equal(s.finishReason, "stop");
  assert.equal(s.stoppedBy, stop);
  assert.equal(s.text, full.slice(0, full.indexOf(stop)));
  assert.equal(pieces.join(""), s.text);
  model.dispose();
});
