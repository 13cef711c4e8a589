/**
 * New tokens per second of the WebGPU step runner (lib/model/engine/webgpu-runner.ts) against the tfjs path (generate()),
 * side by side in one process, plus a per-kernel GPU time breakdown from timestamp queries.
 *   npx tsx bench/decode-gpu.ts                           Qwen2-0.5B-shaped random model, batch 1/16/64,
 *                                                          128 prompt + 128 new tokens (the GPU host's case)
 *   npx tsx bench/decode-gpu.ts --model data/models/shop-sql-4m --batches 256 --prompt 320 --new 128
 *                                                          the default model's GRPO sampling step
 *   bash run.sh bench-decode-gpu.mjs --check                the same from the GPU bundle (scripts/bundle-gpu.mjs)
 * Flags: --model DIR | --shape NAME [--vocab N] [--copy-layers: layers after the first are device copies of it, so a 7B
 * random model builds in about a minute]  --weights-dtype auto|fp32|bf16  --quantization none,int8 (each in turn, same
 * model: int8 runs the base W8A8, lib/model/engine/int8-linears.ts)  --backend webgpu  --batches 1,16,64  --prompt N  --new N  --chunk N (decode steps per read-back,
 * default 16)  --profile-batches 1,64 (batches profiled per kernel; default the largest)  --tfjs-batches 1 (batches also run through generate() on the tfjs-ops runner, T2S_WEBGPU_RUNNER=0;
 * "none" skips; batch 64 there takes about a minute on an H200)  --engine-batches 64 (through generate() on this runner: the engine's overhead)  --check (greedy
 * tokens of the runner against the tfjs path first)  --kv-cache-dtype fp32,fp16,bf16 (each in turn; auto resolves as the engine does,
 * lib/model/kv-cache-dtype.ts; default fp32, as the tables of docs/model.md were measured; with --check, each 16-bit cache's greedy ids
 * against the fp32 cache's, and both caches' bytes)  --json
 * Sampling is temperature 1 with seeded uniforms; no stop token, so every row makes exactly --new tokens.
 */
import { useBackend } from "../lib/backend/select.js";
import { generate } from "../lib/model/generate.js";
import { loadModel } from "../lib/model/load.js";
import type { CausalLM } from "../lib/model/model.js";
import { qwen2HalfBConfig, randomModel } from "../lib/model/random-model.js";
import { sampleToken } from "../lib/model/sampler.js";
import { mulberry32 } from "../lib/core/random.js";
import type { RowSampling } from "../lib/model/engine/runner.js";
import { createWebgpuRunner, type KernelProfile, type WebgpuRunner } from "../lib/model/engine/webgpu-runner.js";
import { benchShape, benchWeightsDtype, flag, intFlag } from "./args.js";
import { applyQuantization, quantizationOption } from "../lib/model/quantization.js";
import { kvCacheBytesPerToken, kvCacheDtypeOption, type KvCacheDtype } from "../lib/model/kv-cache-dtype.js";
import { applyKvCacheDtype, resolveKvCacheDtype } from "../lib/model/engine/runners.js";

function prompts(B: number, len: number, V: number): number[][] {
  return Array.from({ length: B }, (_, b) => Array.from({ length: len }, (_, i) => (b * 7919 + i * 104729 + 1) % V));
}

/** Prefill then decode `newTokens` per row through the runner, `chunk` steps per call; seconds of each phase. */
async function runOnce(runner: WebgpuRunner, ps: number[][], newTokens: number, chunk: number, seed: number): Promise<{ prefill: number; decode: number; ids: number[][] }> {
  const rands = ps.map((_, r) => mulberry32(seed * 1000003 + r));
  const samp = (r: number): RowSampling => ({ temperature: 1, topP: 1, topK: 0, u: rands[r]() });
  const t0 = performance.now();
  const first = await runner.prefill(ps.map((ids, slot) => ({ slot, ids, prefixLength: 0, sampling: samp(slot) })));
  const t1 = performance.now();
  const ids = first.map((t) => [t.id]);
  while (ids[0].length < newTokens) {
    const k = Math.min(chunk, newTokens - ids[0].length);
    const out = await runner.decodeSteps(
      ps.map((p, slot) => ({ slot, id: ids[slot][ids[slot].length - 1], position: p.length + ids[slot].length - 1 })),
      Array.from({ length: k }, () => ps.map((_, r) => samp(r))),
    );
    out.forEach((ts, r) => ids[r].push(...ts.map((t) => t.id)));
  }
  const t2 = performance.now();
  for (let s = 0; s < ps.length; s++) runner.release(s);
  return { prefill: (t1 - t0) / 1000, decode: (t2 - t1) / 1000, ids };
}

/** Greedy tokens of the runner (at the model's quantization) for two short prompts: a prefill and 3 steps. */
async function greedyTokens(model: CausalLM, ps: number[][]): Promise<{ id: number; logprob: number }[][]> {
  const runner = (await createWebgpuRunner(model, { adapter: null, slots: ps.length, maxLength: 96 })) as WebgpuRunner;
  const g: RowSampling = { temperature: 0, topP: 1, topK: 0, u: 0 };
  const first = await runner.prefill(ps.map((ids, slot) => ({ slot, ids, prefixLength: 0, sampling: g })));
  const rest = await runner.decodeSteps(ps.map((p, slot) => ({ slot, id: first[slot].id, position: p.length })), [[g, g], [g, g], [g, g]]);
  runner.dispose();
  return ps.map((_, r) => [first[r], ...rest[r]]);
}

/** Whether the tfjs path can run the model: tfjs widens 16-bit matrices to float32 buffers of at most 2 GiB. */
function tfjsCanRun(model: CausalLM): boolean {
  return model.tensors().every((t) => t.size * 4 * (t.dtype === "int32" ? 2 : 1) <= 2 ** 31 - 4);
}

/**
 * Greedy ids of the runner against a reference on two short prompts. Without quantization the reference is
 * the tfjs path (full recomputation of logits, float32); under int8 it is the same runner without it, so
 * the differences are the quantization's alone (reported rather than failed: random weights give
 * near-ties). A model the tfjs path cannot hold (7B's float32 embedding) is not checked against it.
 */
async function check(model: CausalLM): Promise<string> {
  const ps = prompts(2, 70, model.config.vocabSize);
  const gpu = await greedyTokens(model, ps);
  const lines: string[] = [];
  let worst = 0;
  const compare = (r: number, s: number, ref: { id: number; logprob: number }) => {
    if (ref.id !== gpu[r][s].id) lines.push(`row ${r} step ${s}: runner ${gpu[r][s].id}, reference ${ref.id}`);
    worst = Math.max(worst, Math.abs(ref.logprob - gpu[r][s].logprob));
  };
  let what: string;
  if (model.quantization) {
    const quantization = model.quantization;
    model.quantization = null;
    const ref = await greedyTokens(model, ps);
    model.quantization = quantization;
    ref.forEach((row, r) => row.forEach((t, s) => compare(r, s, t)));
    what = `check (${quantization} runner vs the unquantized runner)`;
  } else if (tfjsCanRun(model)) {
    for (let r = 0; r < ps.length; r++) {
      const ids = ps[r].slice();
      for (let s = 0; s < gpu[r].length; s++) {
        const rows = await model.logitsOf(ids);
        const ref = sampleToken(rows[rows.length - 1], { temperature: 0, topP: 1, topK: 0 }, () => 0);
        compare(r, s, ref);
        ids.push(ref.id);
      }
    }
    what = "check (runner vs float32 tfjs)";
  } else return "check skipped: the tfjs path cannot hold this model's matrices in 2 GiB float32 buffers";
  return `${what}: ${lines.length ? "MISMATCH " + lines.join("; ") : "greedy ids equal"}; max |logprob diff| ${worst.toExponential(2)}`;
}

/** A greedy step of the cache check: the token, its log-probability, and its lead over the runner-up. */
interface GreedyStep {
  id: number;
  logprob: number;
  gap: number;
}

/** Greedy decode of `steps` tokens after each prompt through a runner whose cache is `kv`, with its cache bytes. */
async function greedyWithCache(model: CausalLM, ps: number[][], steps: number, kv: KvCacheDtype): Promise<{ rows: GreedyStep[][]; cacheBytes: number }> {
  const runner = (await createWebgpuRunner(model, { adapter: null, slots: ps.length, maxLength: ps[0].length + steps, kvCacheDtype: kv })) as WebgpuRunner;
  const g: RowSampling = { temperature: 0, topP: 1, topK: 0, u: 0, topLogprobs: 2 };
  const step = (t: { id: number; logprob: number; top?: { logprob: number }[] }): GreedyStep => ({ id: t.id, logprob: t.logprob, gap: t.top && t.top.length > 1 ? t.top[0].logprob - t.top[1].logprob : Infinity });
  const first = await runner.prefill(ps.map((ids, slot) => ({ slot, ids, prefixLength: 0, sampling: g })));
  const rest = await runner.decodeSteps(ps.map((p, slot) => ({ slot, id: first[slot].id, position: p.length })), Array.from({ length: steps - 1 }, () => ps.map(() => g)));
  const cacheBytes = runner.cacheBytes;
  runner.dispose();
  return { rows: ps.map((_, r) => [first[r], ...rest[r]].map(step)), cacheBytes };
}

/**
 * Each 16-bit cache of `kvs` against the fp32 cache on the same weights: 4 rows of a 128-token prompt and
 * 32 greedy tokens. Rows are compared up to their first different id (after it the sequences differ); a
 * difference is shown with the fp32 run's lead of its token over the runner-up there, so a near-tie of a
 * random model reads as one.
 */
async function kvCheck(model: CausalLM, kvs: KvCacheDtype[]): Promise<string[]> {
  const ps = prompts(4, 128, model.config.vocabSize);
  const steps = 32;
  const ref = await greedyWithCache(model, ps, steps, "fp32");
  const mb = (b: number) => `${(b / 1e6).toFixed(2)} MB`;
  const lines: string[] = [];
  for (const kv of kvs.filter((k) => k !== "fp32")) {
    const got = await greedyWithCache(model, ps, steps, kv);
    const diffs: string[] = [];
    let worst = 0;
    ref.rows.forEach((row, r) => {
      for (let s = 0; s < steps; s++) {
        const a = row[s];
        const b = got.rows[r][s];
        worst = Math.max(worst, Math.abs(a.logprob - b.logprob));
        if (a.id !== b.id) {
          diffs.push(`row ${r} step ${s}: ${kv} ${b.id}, fp32 ${a.id} (fp32 lead over the runner-up ${a.gap.toExponential(2)})`);
          break;
        }
      }
    });
    const verdict = diffs.length ? `MISMATCH ${diffs.join("; ")}` : "greedy ids equal";
    lines.push(`kv check (${kv} cache vs fp32 cache, ${ps.length} rows x ${ps[0].length} prompt + ${steps} greedy tokens): ${verdict}; max |logprob diff| ${worst.toExponential(2)}; cache ${mb(got.cacheBytes)} vs ${mb(ref.cacheBytes)} (${kvCacheBytesPerToken(model.config, kv)} vs ${kvCacheBytesPerToken(model.config, "fp32")} bytes per token)`);
  }
  return lines;
}

function profileTable(title: string, p: KernelProfile): string {
  const rows = [...p.entries()].sort((a, b) => b[1].ms - a[1].ms);
  const total = rows.reduce((s, [, v]) => s + v.ms, 0);
  return [`${title}: ${total.toFixed(3)} ms of GPU time`, "kernel          launches      ms   share", ...rows.map(([k, v]) => `${k.padEnd(14)} ${String(v.count).padStart(9)} ${v.ms.toFixed(3).padStart(8)} ${((100 * v.ms) / total).toFixed(1).padStart(6)}%`)].join("\n");
}

async function main(): Promise<void> {
  const choice = await useBackend(flag("--backend") ?? "webgpu");
  const dir = flag("--model");
  // a checkpoint folder (--weights-dtype auto|fp32|bf16 picks its storage), or a random model of --shape (default 0.5B)
  const wd = flag("--weights-dtype") ? benchWeightsDtype() : undefined;
  const shape = flag("--shape") ? benchShape().config : qwen2HalfBConfig();
  const model = dir ? await loadModel(dir, { backend: choice.backend, weightsDtype: wd }) : randomModel(shape, { seed: 1, weightsDtype: wd === "bf16" ? "bf16" : "fp32", copyLayers: process.argv.includes("--copy-layers") });
  const V = model.config.vocabSize;
  const batches = (flag("--batches") ?? "1,16,64").split(",").map(Number);
  const tfjsBatches = (flag("--tfjs-batches") ?? "1") === "none" ? [] : (flag("--tfjs-batches") ?? "1").split(",").map(Number);
  const promptLen = intFlag("--prompt", 128);
  const newTokens = intFlag("--new", 128);
  const chunk = intFlag("--chunk", 16);
  // batches whose prefill and decode step get a per-kernel profile (default: the largest)
  const profileBatches = (flag("--profile-batches") ?? String(batches[batches.length - 1])).split(",").map(Number);
  await model.logitsOf([1, 2, 3]);
  const out: string[] = [`backend ${choice.backend}; model ${dir ?? "qwen2-0.5b-shaped (random)"}; ${model.tensors().reduce((s, t) => s + t.size, 0)} parameters`];
  const table = ["path         batch  prompt  new/seq  prefill s  decode s  total s  new tokens/s  cache GB"];
  // each cache storage in turn, auto resolved as an engine would for this model
  const kvs = [...new Set((flag("--kv-cache-dtype") ?? "fp32").split(",").map((v) => {
    applyKvCacheDtype(model, kvCacheDtypeOption(v));
    return resolveKvCacheDtype(model);
  }))];
  if (process.argv.includes("--check") && kvs.some((k) => k !== "fp32")) {
    for (const line of await kvCheck(model, kvs)) {
      out.push(line);
      process.stderr.write(line + "\n");
    }
  }
  const profiles: string[] = [];
  const json: Record<string, unknown>[] = [];
  for (const quantization of (flag("--quantization") ?? "none").split(",").map(quantizationOption)) {
    applyQuantization(model, quantization);
    const label = quantization === "none" ? "runner" : quantization;
    if (process.argv.includes("--check")) {
      out.push(await check(model));
      process.stderr.write(out[out.length - 1] + "\n");
    }
    for (const { kv, B } of kvs.flatMap((kv) => batches.map((B) => ({ kv, B })))) {
      const runner = (await createWebgpuRunner(model, { adapter: null, slots: B, maxLength: promptLen + newTokens, kvCacheDtype: kv })) as WebgpuRunner;
      const path = kv === "fp32" ? label : `${label}/${kv}`;
      const ps = prompts(B, promptLen, V);
      await runOnce(runner, ps, Math.min(newTokens, chunk + 1), chunk, 99); // warm-up: pipelines compile
      const r = await runOnce(runner, ps, newTokens, chunk, 1);
      const total = r.prefill + r.decode;
      const made = B * newTokens;
      const row = { path: "webgpu", quantization, kv_cache_dtype: kv, cache_bytes: runner.cacheBytes, batch: B, prompt: promptLen, new_per_seq: newTokens, prefill_s: r.prefill, decode_s: r.decode, total_s: total, new_tokens_per_s: made / total, decode_tokens_per_s: (B * (newTokens - 1)) / r.decode };
      json.push(row);
      table.push(`${path.padEnd(12)} ${String(B).padStart(5)}  ${String(promptLen).padStart(6)}  ${String(newTokens).padStart(7)}  ${r.prefill.toFixed(3).padStart(9)}  ${r.decode.toFixed(3).padStart(8)}  ${total.toFixed(3).padStart(7)}  ${(made / total).toFixed(1).padStart(12)}  ${(runner.cacheBytes / 1e9).toFixed(3).padStart(8)}`);
      process.stderr.write(`row ${JSON.stringify(row)}\n`);
      if (profileBatches.includes(B) && runner.canProfile) {
        // one profiled prefill and one profiled 1-step decode
        runner.profile();
        await runner.prefill(ps.map((ids, slot) => ({ slot, ids, prefixLength: 0, sampling: { temperature: 1, topP: 1, topK: 0, u: 0.5 } })));
        profiles.push(profileTable(`${path} prefill, batch ${B} x ${promptLen}`, runner.lastProfile!));
        runner.profile();
        await runner.decode(ps.map((p, slot) => ({ slot, id: 1, position: p.length, sampling: { temperature: 1, topP: 1, topK: 0, u: 0.5 } })));
        profiles.push(profileTable(`${path} decode step, batch ${B}`, runner.lastProfile!));
      }
      runner.dispose();
    }
  }
  applyQuantization(model, "none");
  // generate() through the engine: with its WebGPU runner (the default) and with the tfjs-ops runner
  const viaEngine = [...(flag("--engine-batches") ?? "64").split(",").filter(Boolean).map((B) => ({ B: Number(B), path: "engine" })), ...tfjsBatches.map((B) => ({ B, path: "tfjs" }))];
  for (const { B, path } of viaEngine) {
    if (path === "tfjs") process.env.T2S_WEBGPU_RUNNER = "0";
    else delete process.env.T2S_WEBGPU_RUNNER;
    // the engine's runner at the first cache storage listed; the tfjs-ops runner has only fp32
    model.kvCacheDtype = path === "tfjs" ? "fp32" : kvs[0];
    const start = performance.now();
    const gens = await generate(model, prompts(B, promptLen, V), { temperature: 1, seed: 0, maxTokens: newTokens, eosIds: [], sharePrefix: false });
    const s = (performance.now() - start) / 1000;
    const made = gens.reduce((a, g) => a + g.ids.length, 0);
    json.push({ path, batch: B, prompt: promptLen, new_per_seq: newTokens, total_s: s, new_tokens_per_s: made / s });
    table.push(`${path.padEnd(12)} ${String(B).padStart(5)}  ${String(promptLen).padStart(6)}  ${String(newTokens).padStart(7)}  ${"".padStart(9)}  ${"".padStart(8)}  ${s.toFixed(3).padStart(7)}  ${(made / s).toFixed(1).padStart(12)}`);
    process.stderr.write(`row ${JSON.stringify(json[json.length - 1])}\n`);
  }
  if (process.argv.includes("--json")) process.stdout.write(JSON.stringify({ backend: choice.backend, rows: json }) + "\n");
  process.stdout.write([...out, ...table, "", ...profiles].join("\n") + "\n");
  model.dispose();
}

main().catch((e) => {
  process.stderr.write(`${e instanceof Error ? e.stack : String(e)}\n`);
  process.exit(1);
});
