/**
 * The WebGPU step runner (lib/model/engine/webgpu-runner.ts) against the tfjs CPU path (decoderStep + sampleToken) on the
 * tiny fixture models: greedy tokens and log-probabilities through prefill, decode and multi-step decode,
 * an unmerged adapter, biases, top-n log-probabilities, and sampled tokens checked against the exact
 * inverse CDF of the CPU's logits under the same top-k/top-p cut.
 *
 * It needs a WebGPU adapter. Without a GPU, Mesa's software Vulkan driver (lavapipe) provides one:
 *   VK_DRIVER_FILES=/opt/lvp/lvp_icd.json XDG_RUNTIME_DIR=/tmp node scripts/run-tests.mjs test/model/webgpu-runner.test.ts
 * When no adapter can be created the tests are skipped with the reason.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { useBackend } from "../../lib/backend/select.js";
import { loadModel } from "../../lib/model/load.js";
import { attachAdapter } from "../../lib/model/lora.js";
import { sampleToken } from "../../lib/model/sampler.js";
import type { CausalLM } from "../../lib/model/model.js";
import type { RowSampling } from "../../lib/model/engine/runner.js";
import { fixtureDir } from "./fixtures.js";

const CASES = [
  { name: "llama", base: "llama", adapter: null },
  { name: "qwen2 (q/k/v bias, tied head)", base: "qwen2", adapter: null },
  { name: "qwen3 (q/k norm)", base: "qwen3", adapter: null },
  { name: "llama3 rope scaling", base: "llama3rope", adapter: null },
  { name: "llama + unmerged LoRA", base: "llama", adapter: "llama-lora" },
  { name: "qwen2 + unmerged LoRA", base: "qwen2", adapter: "qwen2-lora" },
] as const;

const PROMPTS = [[5, 17, 33, 2, 90, 41, 7], [12, 250, 3], [77, 1, 64, 300, 8, 9, 10, 11, 12, 13, 14, 200]];
const NEW = 6;

async function load(base: string, adapter: string | null, backend: string): Promise<CausalLM> {
  const model = await loadModel(fixtureDir(base), { backend });
  if (adapter) attachAdapter(model, fixtureDir(adapter), { name: "a" });
  return model;
}

/** Greedy continuations on the CPU by full recomputation, with each step's logits. */
async function cpuGreedy(model: CausalLM, adapter: string | null, prompts: number[][] = PROMPTS, steps = NEW): Promise<{ ids: number[]; logprobs: number[]; logits: Float32Array[] }[]> {
  const out = [];
  for (const p of prompts) {
    const ids = p.slice();
    const r = { ids: [] as number[], logprobs: [] as number[], logits: [] as Float32Array[] };
    for (let s = 0; s < steps; s++) {
      const rows = await model.logitsOf(ids, { adapter });
      const last = rows[rows.length - 1];
      const t = sampleToken(last, { temperature: 0, topP: 1, topK: 0 }, () => 0);
      r.ids.push(t.id);
      r.logprobs.push(t.logprob);
      r.logits.push(last);
      ids.push(t.id);
    }
    out.push(r);
  }
  return out;
}

const greedy = (extra: Partial<RowSampling> = {}): RowSampling => ({ temperature: 0, topP: 1, topK: 0, u: 0, ...extra });

/** The kept tokens of sampler.ts's cut (sorted, top-k then top-p) and the index-order CDF over them. */
function keptCdf(logits: Float32Array, T: number, topK: number, topP: number): { ids: number[]; cdf: number[] } {
  let max = -Infinity;
  for (const v of logits) max = Math.max(max, v);
  const e = Array.from(logits, (v) => Math.exp((v - max) / T));
  const z = e.reduce((a, b) => a + b, 0);
  const p = e.map((v) => v / z);
  let order = p.map((_, i) => i).sort((a, b) => p[b] - p[a] || a - b);
  if (topK > 0) order = order.slice(0, topK);
  let mass = 0;
  let keep = 0;
  for (const i of order) {
    mass += p[i];
    keep++;
    if (mass >= topP) break;
  }
  const ids = order.slice(0, keep).sort((a, b) => a - b);
  const total = ids.reduce((s, i) => s + p[i], 0);
  let acc = 0;
  return { ids, cdf: ids.map((i) => (acc += p[i] / total)) };
}

let reason: string | null = null;
const refs = new Map<string, Awaited<ReturnType<typeof cpuGreedy>>>();
// one 300-token prompt (attention's 256-position blocks twice) and 11 short ones: a 586-row prefill runs
// the 128-row register tile, the 12-row decode the 64-row one
const LONG_PROMPTS = [Array.from({ length: 300 }, (_, i) => (i * 37 + 5) % 320), ...Array.from({ length: 11 }, (_, r) => Array.from({ length: 21 + r }, (_, i) => (r * 53 + i * 11 + 3) % 320))];
let longRef: Awaited<ReturnType<typeof cpuGreedy>> = [];

test("WebGPU runner: references on the CPU backend", async () => {
  for (const c of CASES) {
    const model = await load(c.base, c.adapter, "cpu");
    refs.set(c.name, await cpuGreedy(model, c.adapter ? "a" : null));
    if (c.base === "qwen2" && !c.adapter) longRef = await cpuGreedy(model, null, LONG_PROMPTS, 3);
    model.dispose();
  }
  try {
    await useBackend("webgpu");
  } catch (e) {
    reason = `no WebGPU adapter: ${(e as Error).message}`;
  }
});

for (const c of CASES) {
  test(`WebGPU runner, ${c.name}: greedy ids and logprobs match the CPU through prefill, decode and decodeSteps`, async (t) => {
    if (reason) return t.skip(reason);
    const { createWebgpuRunner } = await import("../../lib/model/engine/webgpu-runner.js");
    const model = await load(c.base, c.adapter, "webgpu");
    const runner = await createWebgpuRunner(model, { adapter: c.adapter ? "a" : null, slots: 4, maxLength: 64 });
    const ref = refs.get(c.name)!;
    // slots out of order, so a row's slot and its index differ
    const slots = [2, 0, 3];
    const first = await runner.prefill(PROMPTS.map((ids, i) => ({ slot: slots[i], ids, prefixLength: 0, sampling: greedy() })));
    const got = first.map((t) => [t]);
    // one single step, then the rest in one multi-step call
    const one = await runner.decode(PROMPTS.map((p, i) => ({ slot: slots[i], id: got[i][0].id, position: p.length, sampling: greedy() })));
    one.forEach((t, i) => got[i].push(t));
    const rest = await runner.decodeSteps(
      PROMPTS.map((p, i) => ({ slot: slots[i], id: got[i][1].id, position: p.length + 1 })),
      Array.from({ length: NEW - 2 }, () => PROMPTS.map(() => greedy())),
    );
    rest.forEach((ts, i) => got[i].push(...ts));
    got.forEach((ts, i) => {
      assert.deepEqual(ts.map((x) => x.id), ref[i].ids, `row ${i} ids`);
      ts.forEach((x, s) => assert.ok(Math.abs(x.logprob - ref[i].logprobs[s]) < 1e-4, `row ${i} step ${s}: logprob ${x.logprob} vs ${ref[i].logprobs[s]}`));
    });
    runner.dispose();
    model.dispose();
  });
}

test("WebGPU runner: many rows and a long prompt (both register tiles, attention over several blocks) match the CPU", async (t) => {
  if (reason) return t.skip(reason);
  const { createWebgpuRunner } = await import("../../lib/model/engine/webgpu-runner.js");
  const prompts = LONG_PROMPTS;
  const model = await load("qwen2", null, "webgpu");
  const runner = await createWebgpuRunner(model, { adapter: null, slots: prompts.length, maxLength: 320 });
  const first = await runner.prefill(prompts.map((ids, slot) => ({ slot, ids, prefixLength: 0, sampling: greedy() })));
  const next = await runner.decodeSteps(prompts.map((p, slot) => ({ slot, id: first[slot].id, position: p.length })), [prompts.map(() => greedy()), prompts.map(() => greedy())]);
  prompts.forEach((_, r) => {
    const got = [first[r], ...next[r]];
    assert.deepEqual(got.map((x) => x.id), longRef[r].ids, `row ${r} ids`);
    got.forEach((x, s) => assert.ok(Math.abs(x.logprob - longRef[r].logprobs[s]) < 1e-4, `row ${r} step ${s}: logprob ${x.logprob} vs ${longRef[r].logprobs[s]}`));
  });
  runner.dispose();
  model.dispose();
});

test("WebGPU runner: bias bans the argmax, top-n logprobs are the CPU's most likely tokens", async (t) => {
  if (reason) return t.skip(reason);
  const { createWebgpuRunner } = await import("../../lib/model/engine/webgpu-runner.js");
  const logits = refs.get("qwen2 (q/k/v bias, tied head)")![0].logits[0];
  const model = await load("qwen2", null, "webgpu");
  const runner = await createWebgpuRunner(model, { adapter: null, slots: 2, maxLength: 32 });
  const order = Array.from(logits.keys()).sort((a, b) => logits[b] - logits[a] || a - b);
  const [banned, boosted] = [order[0], order[7]];
  const [plain, biased] = await runner.prefill([
    { slot: 0, ids: PROMPTS[0], prefixLength: 0, sampling: greedy({ topLogprobs: 5 }) },
    { slot: 1, ids: PROMPTS[0], prefixLength: 0, sampling: greedy({ bias: new Map([[banned, -Infinity], [boosted, 0.0]]) }) },
  ]);
  assert.equal(plain.id, order[0]);
  assert.deepEqual(plain.top!.map((x) => x.id), order.slice(0, 5));
  let max = -Infinity;
  for (const v of logits) max = Math.max(max, v);
  const logZ = Math.log(Array.from(logits).reduce((s, v) => s + Math.exp(v - max), 0));
  plain.top!.forEach((x) => assert.ok(Math.abs(x.logprob - (logits[x.id] - max - logZ)) < 1e-4));
  assert.equal(biased.id, order[1], "the banned argmax is skipped");
  const [boost] = await runner.prefill([{ slot: 0, ids: PROMPTS[0], prefixLength: 0, sampling: greedy({ bias: new Map([[boosted, 100]]) }) }]);
  assert.equal(boost.id, boosted);
  runner.dispose();
  model.dispose();
});

test("WebGPU runner: sampled tokens follow the exact inverse CDF of the top-k/top-p cut", async (t) => {
  if (reason) return t.skip(reason);
  const { createWebgpuRunner } = await import("../../lib/model/engine/webgpu-runner.js");
  const logits = refs.get("llama")![0].logits[0];
  const model = await load("llama", null, "webgpu");
  const slots = 16;
  const runner = await createWebgpuRunner(model, { adapter: null, slots, maxLength: 32 });
  let checked = 0;
  for (const [T, topK, topP] of [[1, 0, 1], [0.7, 0, 1], [1.3, 8, 1], [1, 0, 0.6], [0.9, 20, 0.8]] as const) {
    const { ids, cdf } = keptCdf(logits, T, topK, topP);
    const us = Array.from({ length: slots }, (_, i) => (i + 0.5) / slots);
    const out = await runner.prefill(us.map((u, slot) => ({ slot, ids: PROMPTS[0], prefixLength: 0, sampling: { temperature: T, topK, topP, u } })));
    out.forEach((tok, i) => {
      const u = us[i];
      // a u within rounding of a boundary may land on either side; those are not checked
      if (cdf.some((c) => Math.abs(c - u) < 1e-4)) return;
      const want = ids[cdf.findIndex((c) => u < c)];
      assert.equal(tok.id, want, `T ${T} topK ${topK} topP ${topP} u ${u}`);
      let max = -Infinity;
      for (const v of logits) max = Math.max(max, v);
      const logZ = Math.log(Array.from(logits).reduce((s, v) => s + Math.exp((v - max) / T), 0));
      assert.ok(Math.abs(tok.logprob - ((logits[want] - max) / T - logZ)) < 1e-4, "logprob before the cuts");
      checked++;
    });
    assert.ok(ids.length > 1, "the cut keeps several tokens, so the check can fail");
  }
  assert.ok(checked > 60);
  runner.dispose();
  model.dispose();
});

test("WebGPU runner: rows sharing a prefix copy its keys and values and decode as if they had computed them", async (t) => {
  if (reason) return t.skip(reason);
  const { createWebgpuRunner } = await import("../../lib/model/engine/webgpu-runner.js");
  const model = await load("qwen2", null, "webgpu");
  const system = Array.from({ length: 20 }, (_, i) => 30 + i * 7);
  const prompts = [system.concat([5, 6]), system.concat([9]), system.concat([100, 101, 102])];
  const runner = await createWebgpuRunner(model, { adapter: null, slots: 3, maxLength: 64 });
  const decodeAll = async (prefixLength: number) => {
    const first = await runner.prefill(prompts.map((ids, slot) => ({ slot, ids, prefixLength, sampling: greedy() })));
    const rows = prompts.map((ids, slot) => ({ slot, id: first[slot].id, position: ids.length }));
    const next = await runner.decodeSteps(rows, Array.from({ length: 4 }, () => prompts.map(() => greedy())));
    return prompts.map((_, r) => [first[r], ...next[r]]);
  };
  const whole = await decodeAll(0);
  const shared = await decodeAll(system.length);
  shared.forEach((toks, r) =>
    toks.forEach((tk, s) => {
      assert.equal(tk.id, whole[r][s].id, `row ${r} step ${s}`);
      assert.ok(Math.abs(tk.logprob - whole[r][s].logprob) < 1e-4);
    }),
  );
  runner.dispose();
  model.dispose();
});
