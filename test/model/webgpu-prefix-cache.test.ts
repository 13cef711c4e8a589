/**
 * The WebGPU runner's prefix cache (lib/model/engine/webgpu-prefix-cache.ts): stored prompts live in extra
 * slots of the cache buffers and are copied into a new row's slot; tokens and log-probabilities through
 * prefill and chained decode match a runner without the cache (fp32 and 16-bit caches), calls after calls, rows of one call share
 * what the first computes, and a weight change drops what was stored.
 *
 * It needs a WebGPU adapter; without a GPU, Mesa's software Vulkan driver provides one:
 *   bash scripts/lavapipe.sh run node scripts/run-tests.mjs test/model/webgpu-prefix-cache.test.ts
 * When no adapter can be created the test is skipped with the reason.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { useBackend } from "../../lib/backend/select.js";
import { loadModel } from "../../lib/model/load.js";
import type { MultiStepRunner, RowSampling, SampledToken } from "../../lib/model/engine/runner.js";
import { GenerationEngine } from "../../lib/model/engine/generation-engine.js";
import type { Generation } from "../../lib/model/engine/types.js";
import { fixtureDir } from "./fixtures.js";

const SYSTEM = Array.from({ length: 37 }, (_, i) => (i * 13 + 5) % 300);
const question = (k: number, n: number): number[] => Array.from({ length: n }, (_, i) => (k * 31 + i * 17 + 3) % 300);
const A = [...SYSTEM, ...question(1, 20)];
const B = [...SYSTEM, ...question(2, 9)];
const C = [...SYSTEM, ...question(4, 25)];
/** Prefill calls in order: each row's prompt and slot (the slots are released after each call). */
const CALLS: { ids: number[]; slot: number }[][] = [[{ ids: A, slot: 0 }], [{ ids: B, slot: 1 }], [{ ids: A, slot: 0 }, { ids: A, slot: 2 }], [{ ids: C, slot: 2 }, { ids: C, slot: 0 }, { ids: C, slot: 1 }]];
const greedy: RowSampling = { temperature: 0, topP: 1, topK: 0, u: 0 };

/** Every call's rows: the first token and four chained decode steps. */
async function runCalls(runner: MultiStepRunner): Promise<SampledToken[][]> {
  const out: SampledToken[][] = [];
  for (const call of CALLS) {
    const first = await runner.prefill(call.map((r) => ({ slot: r.slot, ids: r.ids, prefixLength: SYSTEM.length, sampling: greedy })));
    const next = await runner.decodeSteps(call.map((r, i) => ({ slot: r.slot, id: first[i].id, position: r.ids.length })), Array.from({ length: 4 }, () => call.map(() => greedy)));
    call.forEach((r, i) => {
      out.push([first[i], ...next[i]]);
      runner.release(r.slot);
    });
  }
  return out;
}

for (const kvCacheDtype of ["fp32", "fp16"] as const) test(`WebGPU runner, ${kvCacheDtype} cache: prefix caching copies stored prompts into new rows and decodes as if it had computed them`, async (t) => {
  try {
    await useBackend("webgpu");
  } catch (e) {
    return t.skip(`no WebGPU adapter: ${(e as Error).message}`);
  }
  const { createWebgpuRunner } = await import("../../lib/model/engine/webgpu-runner.js");
  const model = await loadModel(fixtureDir("qwen2"), { backend: "webgpu" });
  const off = await createWebgpuRunner(model, { adapter: null, slots: 3, maxLength: 80, kvCacheDtype });
  // two cache slots of 80 tokens: the fourth call's prompt evicts one of the first two
  const on = await createWebgpuRunner(model, { adapter: null, slots: 3, maxLength: 80, kvCacheDtype, prefixCacheTokens: 160 });
  assert.equal(off.prefixCache, undefined);
  const want = await runCalls(off);
  const got = await runCalls(on);
  got.forEach((toks, r) =>
    toks.forEach((tk, s) => {
      assert.equal(tk.id, want[r][s].id, `row ${r} step ${s}`);
      assert.ok(Math.abs(tk.logprob - want[r][s].logprob) < 1e-4, `row ${r} step ${s}: ${tk.logprob} vs ${want[r][s].logprob}`);
    }),
  );
  const queries = CALLS.flat().reduce((n, r) => n + r.ids.length, 0);
  // B: the system part's 2 full blocks; A twice: its 3; C: the system part, then 3 blocks copied from the first C
  assert.deepEqual(on.prefixCache, { queries, hits: 32 + 2 * 48 + 32 + 2 * 48 });
  // the stored A after a training step is not used
  on.weightsChanged!();
  const hits = on.prefixCache!.hits;
  await on.prefill([{ slot: 0, ids: A, prefixLength: 0, sampling: greedy }]);
  assert.equal(on.prefixCache!.hits, hits);
  on.dispose();
  off.dispose();
  model.dispose();
});

test("WebGPU engine: requests sent one wave after another get the same tokens with prefix caching on and off", async (t) => {
  try {
    await useBackend("webgpu");
  } catch (e) {
    return t.skip(`no WebGPU adapter: ${(e as Error).message}`);
  }
  const model = await loadModel(fixtureDir("qwen2"), { backend: "webgpu" });
  const waves = [[A], [B], [A, C], [C, C, C]];
  const run = async (enablePrefixCaching: boolean) => {
    const engine = await GenerationEngine.create(model, { maxBatch: 4, eosIds: [], maxLength: 96, enablePrefixCaching });
    const out: Generation[] = [];
    for (const wave of waves) out.push(...(await Promise.all(wave.map((ids, i) => engine.submit({ ids, prefixLength: SYSTEM.length, temperature: i % 2, seed: 4, sampleIndex: i, maxTokens: 5 })))));
    const metrics = { ...engine.metrics };
    await engine.close();
    return { out, metrics };
  };
  const on = await run(true);
  const off = await run(false);
  on.out.forEach((g, i) => {
    assert.deepEqual(g.ids, off.out[i].ids, `row ${i}`);
    g.logprobs.forEach((lp, j) => assert.ok(Math.abs(lp - off.out[i].logprobs[j]) < 1e-4, `row ${i} token ${j}: ${lp} vs ${off.out[i].logprobs[j]}`));
  });
  assert.equal(on.metrics.prefixCacheQueries, waves.flat().reduce((n, ids) => n + ids.length, 0));
  // B: the system part's 2 blocks; A: 3; C beside A: the declared system part (37) from A's slot; later Cs: 3 blocks
  assert.equal(on.metrics.prefixCacheHits, 32 + 48 + 37 + 3 * 48);
  assert.equal(off.metrics.prefixCacheQueries, 0);
  model.dispose();
});
