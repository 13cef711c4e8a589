/**
 * The 16-bit KV cache of the WebGPU step runner (`kv_cache_dtype` fp16 / bf16, lib/model/kv-cache-dtype.ts)
 * against the fp32 cache on the same weights: greedy ids equal through prefill (a 300-token prompt, so
 * attention reads several 256-position blocks), decode and multi-step decode with fp16 (bf16, 3 bits
 * coarser, may pick another token where the fp32 run nearly tied, and is compared up to there),
 * log-probabilities within TOLERANCE, the cache half the bytes; on a Qwen2 fixture (q/k/v biases, bf16 weights), a Qwen3 one (q/k
 * norm, f16 weights) and a random model whose head size takes the scalar attention kernel. Rows sharing a
 * prefix copy its 16-bit keys and values (prefixCopyWgsl) and decode as if they had computed them.
 *
 * It needs a WebGPU adapter; without a GPU, Mesa's software Vulkan driver (lavapipe) gives one
 * (`bash scripts/lavapipe.sh run node scripts/run-tests.mjs test/model/webgpu-kv16.test.ts`). When no
 * adapter can be created the tests are skipped with the reason.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { useBackend } from "../../lib/backend/select.js";
import { loadModel } from "../../lib/model/load.js";
import { randomModel, tinyConfig } from "../../lib/model/random-model.js";
import type { CausalLM } from "../../lib/model/model.js";
import type { RowSampling, SampledToken } from "../../lib/model/engine/runner.js";
import type { KvCacheDtype } from "../../lib/model/kv-cache-dtype.js";
import { fixtureDir } from "./fixtures.js";

/**
 * Largest |log-probability difference| allowed against the fp32 cache. The stored keys and values are
 * rounded to 11 (fp16) or 8 (bf16) significant bits; on lavapipe fp16 measured at most 1.4e-3 on these
 * models and bf16 1.5e-2 (each case prints its own).
 */
const TOLERANCE: Record<Exclude<KvCacheDtype, "fp32">, number> = { fp16: 5e-3, bf16: 5e-2 };

const LONG = Array.from({ length: 300 }, (_, i) => (i * 37 + 5) % 320);
const PROMPTS = [LONG, [12, 250, 3], [77, 1, 64, 300, 8, 9, 10, 11, 12, 13, 14, 200]];
const NEW = 8;
// the top two, so a different pick can be told from a near-tie
const greedy = (): RowSampling => ({ temperature: 0, topP: 1, topK: 0, u: 0, topLogprobs: 2 });

let reason: string | null = null;
try {
  await useBackend("webgpu");
} catch (e) {
  reason = `no WebGPU adapter: ${(e as Error).message}`;
}

/** Greedy tokens of every prompt through a runner with a `kv` cache: the prefill's, one decode step, then a multi-step call. */
async function decodeWith(model: CausalLM, kv: KvCacheDtype): Promise<{ tokens: SampledToken[][]; cacheBytes: number }> {
  const { createWebgpuRunner } = await import("../../lib/model/engine/webgpu-runner.js");
  const runner = await createWebgpuRunner(model, { adapter: null, slots: PROMPTS.length, maxLength: 320, kvCacheDtype: kv });
  const first = await runner.prefill(PROMPTS.map((ids, slot) => ({ slot, ids, prefixLength: 0, sampling: greedy() })));
  const tokens = first.map((t) => [t]);
  const one = await runner.decode(PROMPTS.map((p, slot) => ({ slot, id: tokens[slot][0].id, position: p.length, sampling: greedy() })));
  one.forEach((t, r) => tokens[r].push(t));
  const rest = await runner.decodeSteps(PROMPTS.map((p, slot) => ({ slot, id: tokens[slot][1].id, position: p.length + 1 })), Array.from({ length: NEW - 2 }, () => PROMPTS.map(() => greedy())));
  rest.forEach((ts, r) => tokens[r].push(...ts));
  const cacheBytes = (runner as unknown as { cacheBytes: number }).cacheBytes;
  runner.dispose();
  return { tokens, cacheBytes };
}

const CASES: { name: string; model: () => Promise<CausalLM> }[] = [
  { name: "qwen2 (q/k/v bias, bf16 weights)", model: () => loadModel(fixtureDir("qwen2"), { backend: "webgpu" }) },
  { name: "qwen3 (q/k norm, f16 weights)", model: () => loadModel(fixtureDir("qwen3"), { backend: "webgpu" }) },
  // head size 24 does not divide 256: attention runs its scalar kernel
  { name: "random, head size 24 (scalar attention)", model: async () => randomModel(tinyConfig({ vocabSize: 320, headDim: 24 }), { seed: 3, backend: "webgpu" }) },
];

/** The fp32 run's lead of its pick over the runner-up at one step. */
const lead = (t: SampledToken) => t.top![0].logprob - t.top![1].logprob;

for (const c of CASES) {
  test(`16-bit KV cache, ${c.name}: fp16 gives the fp32 cache's greedy ids, bf16 until a near-tie; log-probabilities within tolerance, half the bytes`, async (t) => {
    if (reason) return t.skip(reason);
    const model = await c.model();
    try {
      const ref = await decodeWith(model, "fp32");
      for (const kv of ["fp16", "bf16"] as const) {
        const got = await decodeWith(model, kv);
        let worst = 0;
        const turns: string[] = [];
        got.tokens.forEach((ts, r) => {
          // compared up to the first different pick: after it the two sequences differ
          for (let s = 0; s < ts.length; s++) {
            const want = ref.tokens[r][s];
            worst = Math.max(worst, Math.abs(ts[s].logprob - want.logprob));
            if (ts[s].id === want.id) continue;
            // fp16 (auto's choice) must keep every greedy id; bf16 may turn only where the fp32 run nearly tied
            assert.notEqual(kv, "fp16", `fp16 row ${r} step ${s}: ${ts[s].id}, fp32 ${want.id}`);
            assert.ok(lead(want) < TOLERANCE[kv], `${kv} row ${r} step ${s}: ${ts[s].id}, fp32 ${want.id}, whose lead ${lead(want)} is no near-tie`);
            turns.push(`row ${r} step ${s} (fp32 lead ${lead(want).toExponential(2)})`);
            break;
          }
        });
        t.diagnostic(`${kv}: max |logprob diff| ${worst.toExponential(2)} over ${PROMPTS.length} rows x ${NEW} tokens; ${turns.length ? `different at a near-tie: ${turns.join(", ")}` : "greedy ids equal"}`);
        assert.ok(worst < TOLERANCE[kv], `${kv}: max |logprob diff| ${worst} over ${TOLERANCE[kv]}`);
        assert.equal(got.cacheBytes * 2, ref.cacheBytes, `${kv}: the cache takes half of fp32's bytes`);
      }
    } finally {
      model.dispose();
    }
  });
}

test("16-bit KV cache: rows sharing a prefix copy its keys and values and decode as if they had computed them", async (t) => {
  if (reason) return t.skip(reason);
  const { createWebgpuRunner } = await import("../../lib/model/engine/webgpu-runner.js");
  const model = await loadModel(fixtureDir("qwen2"), { backend: "webgpu" });
  const system = Array.from({ length: 40 }, (_, i) => 30 + i * 7);
  const prompts = [system.concat([5, 6]), system.concat([9]), system.concat([100, 101, 102])];
  for (const kv of ["fp16", "bf16"] as const) {
    const runner = await createWebgpuRunner(model, { adapter: null, slots: 3, maxLength: 64, kvCacheDtype: kv });
    const decodeAll = async (prefixLength: number) => {
      const first = await runner.prefill(prompts.map((ids, slot) => ({ slot, ids, prefixLength, sampling: greedy() })));
      const rows = prompts.map((ids, slot) => ({ slot, id: first[slot].id, position: ids.length }));
      const next = await runner.decodeSteps(rows, Array.from({ length: 4 }, () => prompts.map(() => greedy())));
      return prompts.map((_, r) => [first[r], ...next[r]]);
    };
    const whole = await decodeAll(0);
    // other keys and values in every slot first, so a copy that moved nothing would read those
    await runner.prefill(prompts.map((ids, slot) => ({ slot, ids: ids.map((x) => (x * 13 + 1) % 320), prefixLength: 0, sampling: greedy() })));
    const shared = await decodeAll(system.length);
    shared.forEach((toks, r) =>
      toks.forEach((tk, s) => {
        assert.equal(tk.id, whole[r][s].id, `${kv} row ${r} step ${s}`);
        // the copy moves the stored words as they are: the same arithmetic follows
        assert.ok(Math.abs(tk.logprob - whole[r][s].logprob) < 1e-5, `${kv} row ${r} step ${s}: ${tk.logprob} vs ${whole[r][s].logprob}`);
      }),
    );
    runner.dispose();
  }
  model.dispose();
});
