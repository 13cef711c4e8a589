/**
 * The fused causal attention kernels (lib/backend/webgpu/train/attention-train.ts) against the tfjs ops path the
 * decoder runs otherwise (on the same WebGPU backend and on the CPU backend): the context and the gradients
 * of q, k and v, for grouped-query shapes, prefix keys (past > 0), padding, a row with no real token,
 * query counts that are not multiples of the tile, and T = 1; then a whole tiny decoder through
 * ModelTrainable.logits with a shared prompt prefix, fused against ops, with the gradients of every weight.
 *
 * It needs a WebGPU adapter. Without a GPU, Mesa's software Vulkan driver (lavapipe) provides one:
 *   VK_DRIVER_FILES=/opt/lvp/lvp_icd.json XDG_RUNTIME_DIR=/tmp node scripts/run-tests.mjs test/backend/attention-train.test.ts
 * When no adapter can be created the tests are skipped with the reason.
 */
import { before, test } from "node:test";
import assert from "node:assert/strict";
import { relErr, startWebgpu } from "./kernel-support.js";
import { tf } from "../../lib/backend/tf.js";
import { attentionFused, attentionFusedSupports } from "../../lib/backend/webgpu/train/attention-train.js";
import type { AttentionDims } from "../../lib/backend/webgpu/train/attention-train-wgsl.js";
import { useFusedKernels } from "../../lib/backend/webgpu/train/fused.js";
import { attendChunk, attentionBias } from "../../lib/model/attention.js";
import { decoderStep, disposeCache } from "../../lib/model/decoder.js";
import { randomModel, tinyConfig } from "../../lib/model/random-model.js";
import { ModelTrainable } from "../../lib/train/trainable-model.js";

let reason: string | null = null;

before(async () => {
  reason = await startWebgpu();
});

/** A seeded stream of standard normals (Box-Muller over a 32-bit LCG), the same on every backend. */
function normals(n: number, seed: number): Float32Array {
  let state = seed >>> 0 || 1;
  const uniform = () => {
    state = (Math.imul(state, 1664525) + 1013904223) >>> 0;
    return (state + 0.5) / 4294967296;
  };
  const out = new Float32Array(n);
  for (let i = 0; i < n; i++) out[i] = Math.sqrt(-2 * Math.log(uniform())) * Math.cos(2 * Math.PI * uniform());
  return out;
}

/** Batch, heads, kv heads, queries and head size, with `past` keys before the queries. */
interface Case extends Omit<AttentionDims, "S" | "tokenMajor"> {
  name: string;
  past: number;
  /** valid[b][s] over all S = past + T keys. */
  valid: boolean[][];
  /** Run the fused kernel with q and the context laid out [B, T, H, hd]. */
  tokenMajor?: boolean;
  /** Pass the key mask as int32 (the kernels take float32 or int32). */
  intMask?: boolean;
}

const rows = (B: number, S: number, f: (b: number, s: number) => boolean = () => true) =>
  Array.from({ length: B }, (_, b) => Array.from({ length: S }, (_, s) => f(b, s)));

const CASES: Case[] = [
  { name: "GQA H4/KV2, hd 64", B: 2, H: 4, KV: 2, T: 9, past: 0, hd: 64, valid: rows(2, 9) },
  { name: "H4/KV1, 16 prefix keys, T 70 (two query tiles), padding at the end of row 1", B: 2, H: 4, KV: 1, T: 70, past: 16, hd: 64, valid: rows(2, 86, (b, s) => b === 0 || s < 77) },
  { name: "the same, q and the context token-major", B: 2, H: 4, KV: 1, T: 70, past: 16, hd: 64, valid: rows(2, 86, (b, s) => b === 0 || s < 77), tokenMajor: true },
  { name: "H = KV = 2, T 1 after 40 prefix keys, hd 32, an int32 key mask", B: 2, H: 2, KV: 2, T: 1, past: 40, hd: 32, valid: rows(2, 41, (b, s) => b === 0 || s % 3 !== 1), intMask: true },
  { name: "row 1's own tokens all padding (it sees only the prefix), hd 32, token-major", B: 2, H: 4, KV: 2, T: 7, past: 5, hd: 32, valid: rows(2, 12, (b, s) => b === 0 || s < 5), tokenMajor: true },
  { name: "row 1 without a single real token (its context is 0)", B: 2, H: 4, KV: 2, T: 6, past: 0, hd: 64, valid: rows(2, 6, (b) => b === 0) },
];

/** Whether query t of row b sees at least one key (rows that see none must come out 0). */
function seesAny(c: Case): Float32Array {
  const out = new Float32Array(c.B * c.T);
  for (let b = 0; b < c.B; b++) for (let t = 0; t < c.T; t++) out[b * c.T + t] = c.valid[b].some((v, s) => v && s <= c.past + t) ? 1 : 0;
  return out;
}

/** The decoder's ops-path attention (lib/model/decoder.ts), with query rows that see no key zeroed. */
function opsAttention(c: Case, q: tf.Tensor, k: tf.Tensor, v: tf.Tensor): tf.Tensor {
  const { B, H, KV, T, past, hd } = c;
  const ctx = attendChunk(tf.reshape(q, [B, KV, (H / KV) * T, hd]), k, false, v, attentionBias(c.valid, past, T), 1 / Math.sqrt(hd));
  return tf.mul(ctx, tf.tensor(seesAny(c), [B, 1, T, 1]));
}

type Outputs = { ctx: Float32Array; dq: Float32Array; dk: Float32Array; dv: Float32Array };

/** The context and the gradients of sum(ctx * R) for R random, through `path`. */
async function run(c: Case, path: "fused" | "ops"): Promise<Outputs> {
  const { B, H, KV, T, past, hd } = c;
  const S = past + T;
  const [q, k, v, r] = [
    tf.tensor(normals(B * H * T * hd, 1), [B, H, T, hd]),
    tf.tensor(normals(B * KV * S * hd, 2), [B, KV, S, hd]),
    tf.tensor(normals(B * KV * S * hd, 3), [B, KV, S, hd]),
    tf.tensor(normals(B * H * T * hd, 4), [B, H, T, hd]),
  ];
  const mask = tf.tensor(c.valid.flat().map((x) => (x ? 1 : 0)), [B, S], c.intMask ? "int32" : "float32");
  const swap = (x: tf.Tensor) => tf.transpose(x, [0, 2, 1, 3]);
  const fused = (qq: tf.Tensor, kk: tf.Tensor, vv: tf.Tensor) =>
    c.tokenMajor ? swap(attentionFused(swap(qq), kk, vv, mask, past, 1 / Math.sqrt(hd), { tokenMajor: true })) : attentionFused(qq, kk, vv, mask, past, 1 / Math.sqrt(hd));
  const f = (qq: tf.Tensor, kk: tf.Tensor, vv: tf.Tensor) => (path === "fused" ? fused(qq, kk, vv) : opsAttention(c, qq, kk, vv));
  const ctx = f(q, k, v);
  const [dq, dk, dv] = tf.grads((qq: tf.Tensor, kk: tf.Tensor, vv: tf.Tensor) => tf.sum(tf.mul(f(qq, kk, vv), r)))([q, k, v]);
  const out = { ctx: (await ctx.data()) as Float32Array, dq: (await dq.data()) as Float32Array, dk: (await dk.data()) as Float32Array, dv: (await dv.data()) as Float32Array };
  tf.dispose([q, k, v, r, mask, ctx, dq, dk, dv]);
  return out;
}


function assertClose(got: Outputs, want: Outputs, tol: number, what: string): void {
  for (const key of ["ctx", "dq", "dk", "dv"] as const) {
    assert.ok(got[key].every(Number.isFinite), `${what}: ${key} has a non-finite entry`);
    const e = relErr(got[key], want[key]);
    assert.ok(e < tol, `${what}: ${key} differs by ${e.toExponential(2)} (relative)`);
  }
}

for (const c of CASES) {
  test(`fused attention, ${c.name}: context and dq/dk/dv match the ops path on WebGPU and on the CPU`, async (t) => {
    if (reason) return t.skip(reason);
    const fused = await run(c, "fused");
    const ops = await run(c, "ops");
    await tf.setBackend("cpu");
    let cpu: Outputs;
    try {
      cpu = await run(c, "ops");
    } finally {
      await tf.setBackend("webgpu");
    }
    assertClose(fused, ops, 1e-4, "fused vs ops (webgpu)");
    assertClose(fused, cpu, 1e-4, "fused vs ops (cpu)");
    // the gradients are not all zero (a kernel that wrote nothing would pass a comparison with zeros)
    for (const key of ["ctx", "dq", "dk", "dv"] as const) assert.ok(fused[key].some((x) => Math.abs(x) > 1e-3), `${key} is all zero`);
    const any = seesAny(c);
    for (let b = 0; b < c.B; b++) {
      for (let h = 0; h < c.H; h++) {
        for (let t = 0; t < c.T; t++) {
          if (any[b * c.T + t]) continue;
          const at = ((b * c.H + h) * c.T + t) * c.hd;
          assert.ok(fused.ctx.slice(at, at + c.hd).every((x) => x === 0), `row ${b} query ${t} sees no key: its context must be 0`);
          assert.ok(fused.dq.slice(at, at + c.hd).every((x) => x === 0), `row ${b} query ${t} sees no key: its dq must be 0`);
        }
      }
    }
  });
}

test("fused attention rejects shapes it cannot run", async (t) => {
  if (reason) return t.skip(reason);
  const q = tf.zeros([1, 3, 4, 64]);
  const k = tf.zeros([1, 2, 4, 64]);
  const mask = tf.ones([1, 4]);
  assert.throws(() => attentionFused(q, k, k, mask, 0, 0.125), /bad shapes/);
  // a head size the kernels do not run: decoderStep keeps the ops path for it
  const q10 = tf.zeros([1, 2, 4, 10]);
  const k10 = tf.zeros([1, 2, 4, 10]);
  assert.equal(attentionFusedSupports(10), false);
  assert.ok(attentionFusedSupports(64) && attentionFusedSupports(32) && attentionFusedSupports(128));
  assert.throws(() => attentionFused(q10, k10, k10, mask, 0, 0.3), /bad shapes/);
  tf.dispose([q, k, mask, q10, k10]);
});

/** Logits of ids from `from` on and the gradients of a weighted sum of them w.r.t. every weight. */
async function decoderRun(lm: ModelTrainable, ids: number[][], from: number, fused: boolean): Promise<{ logits: Float32Array; grads: Map<string, Float32Array> }> {
  useFusedKernels(fused);
  try {
    const vars = lm.trainableParams().map((p) => p.variable);
    const weights = tf.tensor(normals(ids.length * (ids[0].length - from) * lm.vocabSize, 7), [ids.length, ids[0].length - from, lm.vocabSize]);
    const logits = lm.logits(ids, { from });
    const profile = await tf.profile(() => tf.dispose(lm.logits(ids, { from })));
    assert.equal(profile.kernelNames.includes("T2sAttention"), fused, `the fused attention kernel ${fused ? "did not run" : "ran"}`);
    const { grads } = tf.variableGrads(() => tf.sum(tf.mul(lm.logits(ids, { from }), weights)), vars);
    const out = new Map<string, Float32Array>();
    for (const p of lm.trainableParams()) out.set(p.name, (await grads[p.variable.name].data()) as Float32Array);
    const result = { logits: (await logits.data()) as Float32Array, grads: out };
    tf.dispose([weights, logits, ...Object.values(grads)]);
    return result;
  } finally {
    useFusedKernels(true);
  }
}

test("decoder: ModelTrainable.logits with a shared 18-token prefix, fused attention against the ops path, logits and every weight's gradient", async (t) => {
  if (reason) return t.skip(reason);
  for (const overrides of [{}, { headDim: 64, numKvHeads: 1 }]) {
    const model = randomModel(tinyConfig({ numLayers: 2, vocabSize: 96, ...overrides }), { seed: 3 });
    const lm = new ModelTrainable(model, null);
    const prefix = Array.from({ length: 18 }, (_, i) => (i * 7 + 3) % 96);
    const ids = [prefix.concat([5, 9, 11, 2, 40, 41, 42]), prefix.concat([60, 61, 1, 0, 17, 33, 80])];
    const fused = await decoderRun(lm, ids, 20, true);
    const ops = await decoderRun(lm, ids, 20, false);
    assert.ok(relErr(fused.logits, ops.logits) < 1e-4, `logits differ by ${relErr(fused.logits, ops.logits)}`);
    for (const [name, g] of ops.grads) {
      const e = relErr(fused.grads.get(name)!, g);
      assert.ok(e < 1e-4, `${JSON.stringify(overrides)} gradient of ${name} differs by ${e.toExponential(2)} (relative)`);
    }
    lm.dispose();
    model.dispose();
  }
});

/** decoderStep's logits for a left-padded prefill and one decode step on its cache, at the real tokens only. */
async function paddedSteps(model: ReturnType<typeof randomModel>, fused: boolean): Promise<Float32Array[]> {
  useFusedKernels(fused);
  try {
    const { config: c, weights: w, invFreq } = model;
    // row 1 is left-padded by 3: its first queries see no real key (fused gives them context 0, the ops
    // path an average), so only real tokens' logits are compared
    const prefill = { ids: [[4, 8, 15, 16, 23, 42], [0, 0, 0, 7, 9, 11]], positions: [[0, 1, 2, 3, 4, 5], [0, 0, 0, 0, 1, 2]], valid: [[true, true, true, true, true, true], [false, false, false, true, true, true]] };
    const first = decoderStep(c, w, invFreq, prefill, null);
    const next = decoderStep(c, w, invFreq, { ids: [[5], [6]], positions: [[6], [3]], valid: [[true], [true]] }, first.cache);
    const a = (await first.logits.data()) as Float32Array;
    const V = c.vocabSize;
    const real = prefill.valid.flatMap((row, b) => row.flatMap((ok, t) => (ok ? [a.slice((b * 6 + t) * V, (b * 6 + t + 1) * V)] : [])));
    const out = [...real, (await next.logits.data()) as Float32Array];
    tf.dispose([first.logits, next.logits]);
    disposeCache(first.cache);
    disposeCache(next.cache);
    return out;
  } finally {
    useFusedKernels(true);
  }
}

test("decoder: left-padded prefill and a decode step on its cache, fused attention against the ops path", async (t) => {
  if (reason) return t.skip(reason);
  const model = randomModel(tinyConfig({ numLayers: 2, vocabSize: 64 }), { seed: 5 });
  const fused = await paddedSteps(model, true);
  const ops = await paddedSteps(model, false);
  fused.forEach((f, i) => assert.ok(relErr(f, ops[i]) < 1e-4, `logits ${i} differ by ${relErr(f, ops[i]).toExponential(2)}`));
  model.dispose();
});
