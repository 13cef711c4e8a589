/**
 * The WebGPU step runner with `quantization: "int8"` (lib/model/engine/int8-linears.ts) against the same
 * runner in float32 on the fixture models: a 22-row prefill (W8A8: quantized activations, the int8 GEMM,
 * the epilogue with biases) and 3-row decode steps (int8 weights, float32 activations), with an unmerged
 * LoRA adapter beside the int8 base. The int8 blocks run in plain WGSL here
 * (T2S_INT8_MMA=portable: the same integers as the matrix units); without that, a device with no int8
 * subgroup matrices refuses int8 with the reason.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { useBackend } from "../../lib/backend/select.js";
import { loadModel } from "../../lib/model/load.js";
import { attachAdapter } from "../../lib/model/lora.js";
import { applyQuantization } from "../../lib/model/quantization.js";
import { isT2sError } from "../../lib/core/errors.js";
import type { RowSampling, SampledToken } from "../../lib/model/engine/runner.js";
import { fixtureDir } from "./fixtures.js";

const PROMPTS = [[5, 17, 33, 2, 90, 41, 7], [12, 250, 3], [77, 1, 64, 300, 8, 9, 10, 11, 12, 13, 14, 200]];
const STEPS = 4;
const greedy = (): RowSampling => ({ temperature: 0, topP: 1, topK: 0, u: 0, topLogprobs: 5 });

let reason: string | null = null;
try {
  await useBackend("webgpu");
} catch (e) {
  reason = `no WebGPU adapter: ${(e as Error).message}`;
}

/**
 * Greedy picks with top-5 log-probabilities after each prompt and then after each of `feed`'s tokens (the
 * same context for both runs, whatever either would pick), int8 or not.
 */
async function decode(base: string, adapter: string | null, int8: boolean, feed: number[][]): Promise<SampledToken[][]> {
  const { createWebgpuRunner } = await import("../../lib/model/engine/webgpu-runner.js");
  const model = await loadModel(fixtureDir(base), { backend: "webgpu" });
  if (adapter) attachAdapter(model, fixtureDir(adapter), { name: "a" });
  if (int8) applyQuantization(model, "int8");
  const runner = await createWebgpuRunner(model, { adapter: adapter ? "a" : null, slots: 3, maxLength: 64 });
  const out = (await runner.prefill(PROMPTS.map((ids, slot) => ({ slot, ids, prefixLength: 0, sampling: greedy() })))).map((t) => [t]);
  for (let s = 0; s < STEPS - 1; s++) {
    const next = await runner.decode(PROMPTS.map((p, slot) => ({ slot, id: feed[slot][s] ?? out[slot][s].id, position: p.length + s, sampling: greedy() })));
    next.forEach((t, r) => out[r].push(t));
  }
  runner.dispose();
  model.dispose();
  return out;
}

test("int8 on a device without int8 subgroup matrices is one clear error", async (t) => {
  if (reason) return t.skip(reason);
  const saved = process.env.T2S_INT8_MMA;
  delete process.env.T2S_INT8_MMA;
  const model = await loadModel(fixtureDir("llama"), { backend: "webgpu" });
  try {
    applyQuantization(model, "int8");
    // a GPU with the units passes: then the runner must build
    model.dispose();
  } catch (e) {
    assert.ok(isT2sError(e) && e.code === "quantization_unsupported", String(e));
    assert.match((e as Error).message, /int8 matrix units: .*(subgroup matrices|int8 16x16x32|threads)/);
    model.dispose();
  } finally {
    if (saved !== undefined) process.env.T2S_INT8_MMA = saved;
  }
});

// one model of each feature: qwen2's q/k/v biases (concatenated for the fused int8 group) and a LoRA adapter
for (const c of [{ base: "qwen2", adapter: "qwen2-lora" }] as const) {
  test(`int8 sampling on ${c.base}${c.adapter ? " + LoRA" : ""} follows float32: same greedy tokens, log-probabilities within quantization error`, async (t) => {
    if (reason) return t.skip(reason);
    process.env.T2S_INT8_MMA = "portable";
    try {
      // float32's own greedy continuation is the context both runs are scored in
      const ref = await decode(c.base, c.adapter, false, [[], [], []]);
      const feed = ref.map((row) => row.map((t) => t.id));
      const got = await decode(c.base, c.adapter, true, feed);
      let worst = 0;
      got.forEach((row, r) =>
        row.forEach((tok, s) => {
          // the int8 top-1 must be one of float32's top-5, at nearly the same log-probability
          const same = ref[r][s].top!.find((x) => x.id === tok.id);
          assert.ok(same, `row ${r} step ${s}: int8 picked ${tok.id}, not in float32's top 5`);
          worst = Math.max(worst, Math.abs(same.logprob - tok.logprob));
        }),
      );
      // quantization moves these tiny random models' log-probabilities by up to ~0.13; a wrong weight,
      // bias or adapter moves them by nats
      assert.ok(worst < 0.25, `largest log-probability gap ${worst}`);
      const ids = (x: SampledToken[][]) => x.map((row) => row.map((t) => t.id));
      assert.deepEqual(ids(got)[0].slice(0, 1), ids(ref)[0].slice(0, 1), "the first prefill row picks float32's token");
      // and it is not float32 itself: the int8 log-probabilities differ somewhere
      assert.ok(got.some((row, r) => row.some((tok, s) => tok.logprob !== ref[r][s].logprob)), "int8 gave float32's exact numbers: was it used?");
    } finally {
      delete process.env.T2S_INT8_MMA;
    }
  });
}

test("a merged adapter samples at its base's quantization", async () => {
  const { mergedModel } = await import("../../lib/model/lora.js");
  const base = await loadModel(fixtureDir("qwen2"), { backend: "cpu" });
  base.quantization = "int8";
  const merged = await mergedModel(base, fixtureDir("qwen2-lora"), { name: "m" });
  assert.equal(merged.quantization, "int8");
  merged.dispose();
  base.dispose();
});
