/**
 * 16-bit weight storage on WebGPU: a bf16 (or f16) checkpoint kept packed on the device gives, through the
 * step runner (the GEMM and embedding kernels widening the words) and through the tfjs-op decoder (the
 * widening kernel per use), the greedy tokens of the same checkpoint widened to float32 on the CPU, with
 * log-probabilities and logits within 1e-4; an unmerged LoRA adapter on a packed base too.
 *
 * It needs a WebGPU adapter; without a GPU, Mesa's software Vulkan driver (lavapipe) gives one (see
 * environment.md). When no adapter can be created the tests are skipped with the reason.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { rmSync } from "node:fs";
import { join } from "node:path";
import { useBackend } from "../../lib/backend/select.js";
import { loadModel } from "../../lib/model/load.js";
import { attachAdapter } from "../../lib/model/lora.js";
import { isPacked } from "../../lib/model/packed.js";
import { sampleToken } from "../../lib/model/sampler.js";
import { writeSafetensors, type StDtype } from "../../lib/model/safetensors.js";
import type { CausalLM } from "../../lib/model/model.js";
import { copyFixture, fixtureDir, maxAbsDiff } from "./fixtures.js";

const CASES: { base: string; dtype: StDtype; adapter: string | null }[] = [
  { base: "llama", dtype: "BF16", adapter: null },
  { base: "qwen2", dtype: "BF16", adapter: null },
  { base: "qwen3", dtype: "BF16", adapter: null },
  { base: "llama3rope", dtype: "F16", adapter: null },
  { base: "qwen2", dtype: "BF16", adapter: "qwen2-lora" },
];
const PROMPTS = [[5, 17, 33, 2, 90, 41, 7], [12, 250, 3]];
const NEW = 5;

async function load(dir: string, backend: string, adapter: string | null): Promise<CausalLM> {
  const model = await loadModel(dir, { backend, weightsDtype: backend === "cpu" ? "fp32" : "auto" });
  if (adapter) attachAdapter(model, fixtureDir(adapter), { name: "a" });
  return model;
}

/** Greedy continuations by full recomputation, with the logits of each prompt. */
async function greedyRef(model: CausalLM, adapter: string | null) {
  const out: { ids: number[]; logprobs: number[]; logits: Float32Array[] }[] = [];
  for (const p of PROMPTS) {
    const seq = p.slice();
    const r = { ids: [] as number[], logprobs: [] as number[], logits: await model.logitsOf(p, { adapter }) };
    for (let s = 0; s < NEW; s++) {
      const rows = await model.logitsOf(seq, { adapter });
      const t = sampleToken(rows[rows.length - 1], { temperature: 0, topP: 1, topK: 0 }, () => 0);
      r.ids.push(t.id);
      r.logprobs.push(t.logprob);
      seq.push(t.id);
    }
    out.push(r);
  }
  return out;
}

for (const c of CASES) {
  test(`WebGPU, ${c.base} ${c.dtype}${c.adapter ? " + LoRA" : ""}: packed storage gives float32 storage's tokens and logits`, async (t) => {
    const dir = copyFixture(c.base, (d, tensors) => writeSafetensors(join(d, "model.safetensors"), tensors, { dtype: c.dtype }));
    try {
      await useBackend("cpu");
      const cpu = await load(dir, "cpu", c.adapter);
      const ref = await greedyRef(cpu, c.adapter ? "a" : null);
      cpu.dispose();
      try {
        await useBackend("webgpu");
      } catch (e) {
        return t.skip(`no WebGPU adapter: ${(e as Error).message}`);
      }
      const model = await load(dir, "webgpu", c.adapter);
      assert.equal(isPacked(model.weights.layers[0].down.weight), true, "auto keeps a 16-bit checkpoint packed on WebGPU");
      // the tfjs-op decoder (training, logits) widens per use
      for (let i = 0; i < PROMPTS.length; i++) {
        const got = await model.logitsOf(PROMPTS[i], { adapter: c.adapter ? "a" : null });
        const err = maxAbsDiff(ref[i].logits.map((r) => Array.from(r)), got);
        assert.ok(err < 1e-4, `decoder logits of prompt ${i}: max abs error ${err}`);
      }
      // the step runner reads the words in its kernels
      const { createWebgpuRunner } = await import("../../lib/model/engine/webgpu-runner.js");
      const runner = await createWebgpuRunner(model, { adapter: c.adapter ? "a" : null, slots: 2, maxLength: 32 });
      const greedy = { temperature: 0, topP: 1, topK: 0, u: 0 };
      const first = await runner.prefill(PROMPTS.map((ids, slot) => ({ slot, ids, prefixLength: 0, sampling: greedy })));
      const rest = await runner.decodeSteps(PROMPTS.map((p, slot) => ({ slot, id: first[slot].id, position: p.length })), Array.from({ length: NEW - 1 }, () => PROMPTS.map(() => greedy)));
      PROMPTS.forEach((_, i) => {
        const ts = [first[i], ...rest[i]];
        assert.deepEqual(ts.map((x) => x.id), ref[i].ids, `row ${i} ids`);
        ts.forEach((x, s) => assert.ok(Math.abs(x.logprob - ref[i].logprobs[s]) < 1e-4, `row ${i} step ${s}: logprob ${x.logprob} vs ${ref[i].logprobs[s]}`));
      });
      runner.dispose();
      model.dispose();
    } finally {
      await useBackend("cpu");
      rmSync(dir, { recursive: true, force: true });
    }
  });
}
