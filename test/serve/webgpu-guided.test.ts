/**
 * Guided decoding's mask and raw logprobs on the WebGPU runner's device sampler, against the CPU's
 * sampleRow on the same logits: a short allow list (sent as one), a long one (sent as the banned tokens),
 * each with a logit bias, greedy and sampled, and raw log-probabilities equal at T = 0.5 and T = 2.
 * Needs a WebGPU adapter (skipped without one; lavapipe works: see test/model/webgpu-runner.test.ts).
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { useBackend } from "../../lib/backend/select.js";
import { loadModel } from "../../lib/model/load.js";
import type { RowSampling } from "../../lib/model/engine/runner.js";
import { sampleRow } from "../../lib/model/engine/tfjs-runner.js";
import { fixtureDir } from "../model/fixtures.js";

const PROMPT = [5, 17, 33, 2, 90, 41, 7];

function maskOf(V: number, ids: number[]): Int32Array {
  const m = new Int32Array(Math.ceil(V / 32));
  for (const id of ids) m[id >> 5] |= 1 << (id & 31);
  return m;
}

test("WebGPU sampler: guided masks (allow list and ban list) and raw logprobs match the CPU's sampleRow", async (t) => {
  const cpu = await loadModel(fixtureDir("qwen2"), { backend: "cpu" });
  const rows = await cpu.logitsOf(PROMPT, { adapter: null });
  const logits = rows[rows.length - 1];
  cpu.dispose();
  try {
    await useBackend("webgpu");
  } catch (e) {
    return t.skip(`no WebGPU adapter: ${(e as Error).message}`);
  }
  const V = logits.length;
  const model = await loadModel(fixtureDir("qwen2"), { backend: "webgpu" });
  const { createWebgpuRunner } = await import("../../lib/model/engine/webgpu-runner.js");
  const runner = await createWebgpuRunner(model, { adapter: null, slots: 8, maxLength: 32 });
  const order = Array.from(logits.keys()).sort((a, b) => logits[b] - logits[a]);
  const few = [order[7], order[40], order[100]];
  const many = order.slice(5);
  const cases: RowSampling[] = [
    { temperature: 0, topP: 1, topK: 0, u: 0, allowed: maskOf(V, few) },
    { temperature: 0, topP: 1, topK: 0, u: 0, allowed: maskOf(V, many), bias: new Map([[order[6], 5]]) },
    { temperature: 1, topP: 1, topK: 0, u: 0.5, allowed: maskOf(V, few), bias: new Map([[few[2], 2]]) },
    { temperature: 0.5, topP: 1, topK: 1, u: 0.3, rawLogprobs: true, topLogprobs: 3 },
    { temperature: 2, topP: 1, topK: 1, u: 0.3, rawLogprobs: true, topLogprobs: 3 },
    { temperature: 0, topP: 1, topK: 0, u: 0, rawLogprobs: true, allowed: maskOf(V, few), bias: new Map([[few[1], 3]]) },
  ];
  const got = await runner.prefill(cases.map((sampling, slot) => ({ slot, ids: PROMPT, prefixLength: 0, sampling })));
  cases.forEach((s, i) => {
    const want = sampleRow(logits, s);
    if (s.temperature === 0 || s.topK === 1) assert.equal(got[i].id, want.id, `case ${i} id`);
    if (s.allowed) assert.ok(((s.allowed[got[i].id >> 5] >>> (got[i].id & 31)) & 1) === 1, `case ${i}: ${got[i].id} is outside the mask`);
    if (s.temperature === 0 || s.topK === 1) assert.ok(Math.abs(got[i].logprob - want.logprob) < 1e-3, `case ${i}: logprob ${got[i].logprob} vs ${want.logprob}`);
  });
  assert.ok(Math.abs(got[3].logprob - got[4].logprob) < 1e-4, "raw logprobs do not depend on the temperature");
  got[3].top!.forEach((x, j) => assert.ok(Math.abs(x.logprob - got[4].top![j].logprob) < 1e-4));
  runner.dispose();
  model.dispose();
});
