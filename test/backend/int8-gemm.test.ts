/**
 * The W8A8 kernels (lib/backend/webgpu/step/int8.ts) against CPU references: row quantization byte for
 * byte, the int8 GEMM's integers exactly (several tiles, split K, rows and columns past a tile, K past a
 * step), the epilogue's dequantization, bias and residual add, and the int8-weight few-rows kernel. The
 * GEMM runs its `portable` form here (plain WGSL: any adapter, Mesa's software driver in CI); the
 * `subgroup-matrix` form computes the same integers on the GPU's matrix units (bench:kernels checks it
 * there against the same references).
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { startWebgpu } from "./kernel-support.js";
import { GpuContext } from "../../lib/backend/webgpu/step/device.js";
import { int8EpilogueWgsl, int8GemmGroups, int8GemmWgsl, int8TileFor, paddedK, quantizeRowsHost, quantizeRowsWgsl, resultRows, resultStride, tileRows, type Int8GemmSpec } from "../../lib/backend/webgpu/step/int8.js";
import { gemmCode, gemmGroups, type GemmSpec } from "../../lib/backend/webgpu/step/gemm.js";

const skip = await startWebgpu();

function rand(n: number, seed: number, scale = 1): Float32Array {
  let s = seed >>> 0;
  const out = new Float32Array(n);
  for (let i = 0; i < n; i++) {
    s = (Math.imul(s, 1664525) + 1013904223) >>> 0;
    out[i] = ((s >>> 8) / 8388608 - 1) * scale;
  }
  return out;
}

function upload(ctx: GpuContext, data: ArrayBufferView): GPUBuffer {
  const b = ctx.buffer(data.byteLength);
  ctx.device.queue.writeBuffer(b, 0, data.buffer, data.byteOffset, Math.ceil(data.byteLength / 4) * 4);
  return b;
}

async function run(ctx: GpuContext, dispatches: { code: string; buffers: GPUBuffer[]; groups: [number, number, number] }[], read: GPUBuffer, bytes: number): Promise<ArrayBuffer> {
  ctx.device.pushErrorScope("validation");
  const encoder = ctx.device.createCommandEncoder();
  ctx.encode(encoder, dispatches.map((d, i) => ({ label: String(i), pipeline: ctx.pipeline(d.code), buffers: d.buffers, groups: d.groups })));
  const back = ctx.readBack(encoder, read, bytes);
  ctx.device.queue.submit([encoder.finish()]);
  const err = await ctx.device.popErrorScope();
  assert.equal(err, null, err?.message);
  return back();
}

/**
 * Equal int8 rows, allowing one step where the device's division rounded a value that sits on a .5 tie
 * the other way (WGSL does not promise a correctly rounded 127 / max): at most 1 in 200 values.
 */
function sameBytes(got: Int8Array, want: Int8Array, what: string): void {
  assert.equal(got.length, want.length, what);
  let off = 0;
  for (let i = 0; i < want.length; i++) {
    assert.ok(Math.abs(got[i] - want[i]) <= 1, `${what}: byte ${i} is ${got[i]}, want ${want[i]}`);
    if (got[i] !== want[i]) off++;
  }
  assert.ok(off <= want.length / 200, `${what}: ${off} bytes off by one`);
}

function dims(ctx: GpuContext, M: number, R = M): GPUBuffer {
  const b = ctx.buffer(16, GPUBufferUsage.UNIFORM | GPUBufferUsage.COPY_DST);
  ctx.device.queue.writeBuffer(b, 0, new Uint32Array([M, R, 0, 0]));
  return b;
}

test("weight and activation rows quantize to the CPU's bytes and scales (K padded with zeros)", { skip: skip ?? false }, async () => {
  const ctx = new GpuContext();
  for (const [rows, K] of [[3, 100], [5, 64], [2, 300]]) {
    const x = rand(rows * K, rows * 7 + K, 3);
    x[0] = 0;
    const ref = quantizeRowsHost(x, rows, K);
    const KW = paddedK(K) / 4;
    const q = ctx.buffer(rows * KW * 4);
    const s = ctx.buffer(rows * 4);
    const w = upload(ctx, x);
    const wq = new Uint32Array(await run(ctx, [{ code: quantizeRowsWgsl({ kind: "weight", rows, K, off: 0 }), buffers: [w, q, s], groups: [rows, 1, 1] }], q, rows * KW * 4));
    sameBytes(new Int8Array(wq.buffer), ref.q, `weights ${rows}x${K}`);
    const ws = new Float32Array(await run(ctx, [], s, rows * 4));
    ws.forEach((v, i) => assert.ok(Math.abs(v - ref.scales[i]) <= 1e-6 * ref.scales[i], `scale ${i}: ${v} vs ${ref.scales[i]}`));
    // the same rows as activations of stride K + 3 (only the first K of each row count)
    const lda = K + 3;
    const a = new Float32Array(rows * lda);
    for (let r = 0; r < rows; r++) a.set(x.subarray(r * K, r * K + K), r * lda);
    const aq = new Uint32Array(await run(ctx, [{ code: quantizeRowsWgsl({ kind: "activation", rows: "M", K, lda, swiglu: false }), buffers: [dims(ctx, rows), upload(ctx, a), q, s], groups: [rows, 1, 1] }], q, rows * KW * 4));
    sameBytes(new Int8Array(aq.buffer), ref.q, `activations ${rows}x${K}`);
  }
});

/** C = A · Wᵀ over int8 rows of paddedK bytes, as exact integers. */
function int8Matmul(a: Int8Array, w: Int8Array, M: number, N: number, Kp: number): Int32Array {
  const c = new Int32Array(M * N);
  for (let m = 0; m < M; m++) for (let n = 0; n < N; n++) {
    let s = 0;
    for (let k = 0; k < Kp; k++) s += a[m * Kp + k] * w[n * Kp + k];
    c[m * N + n] = s;
  }
  return c;
}

test("the int8 GEMM and its epilogue match the CPU exactly, across tiles, K slices and ragged edges", { skip: skip ?? false }, async () => {
  const ctx = new GpuContext();
  for (const [M, N, K, splits] of [[5, 40, 100, 1], [20, 70, 200, 3], [70, 130, 320, 2]]) {
    const Kp = paddedK(K);
    const xa = quantizeRowsHost(rand(M * K, M + K, 2), M, K);
    const xw = quantizeRowsHost(rand(N * K, N + 3 * K, 0.5), N, K);
    const spec: Int8GemmSpec = { K, N, rows: "M", splits };
    const t = int8TileFor(M);
    const MP = resultRows(M, t);
    const NP = resultStride(N, t);
    const C = ctx.buffer(splits * MP * NP * 4);
    const d = dims(ctx, M);
    const qa = upload(ctx, xa.q);
    const qw = upload(ctx, xw.q);
    const sa = upload(ctx, xa.scales);
    const sw = upload(ctx, xw.scales);
    const bias = rand(N, 5);
    const resid = rand(M * (N + 2), 6);
    const out = upload(ctx, resid);
    const epi = int8EpilogueWgsl({ N, rows: "M", splits, stride: NP, tileRows: tileRows(t), ldo: N + 2, off: 1, scale: 0.5, bias: true, mode: "add" });
    const got = new Float32Array(await run(ctx, [
      { code: int8GemmWgsl(spec, M, "portable"), buffers: [d, qa, qw, C], groups: int8GemmGroups(spec, M) },
      { code: epi, buffers: [d, C, sa, sw, out, upload(ctx, bias)], groups: GpuContext.groups1d(Math.ceil((M * N) / 256)) },
    ], out, resid.byteLength));
    const cInt = int8Matmul(xa.q, xw.q, M, N, Kp);
    const parts = new Int32Array(await run(ctx, [], C, splits * MP * NP * 4));
    for (let m = 0; m < M; m++) for (let n = 0; n < N; n++) {
      let sum = 0;
      for (let z = 0; z < splits; z++) sum += parts[(z * MP + m) * NP + n];
      assert.equal(sum, cInt[m * N + n], `C[${m}, ${n}] for ${M}x${N}x${K} splits ${splits}`);
      const want = resid[m * (N + 2) + 1 + n] + cInt[m * N + n] * xa.scales[m] * xw.scales[n] * 0.5 + bias[n];
      assert.ok(Math.abs(got[m * (N + 2) + 1 + n] - want) <= 1e-5 * (1 + Math.abs(want)), `out[${m}, ${n}] ${got[m * (N + 2) + 1 + n]} vs ${want}`);
    }
    // columns outside [off, off + N) of each output row are untouched
    for (let m = 0; m < M; m++) {
      assert.equal(got[m * (N + 2)], resid[m * (N + 2)]);
      assert.equal(got[m * (N + 2) + N + 1], resid[m * (N + 2) + N + 1]);
    }
  }
});

test("the few-rows kernel reads int8 weights with float32 activations and column scales", { skip: skip ?? false }, async () => {
  const ctx = new GpuContext();
  for (const [M, N, K] of [[1, 33, 100], [8, 70, 256]]) {
    const a = rand(M * K, M + 11 * K);
    const xw = quantizeRowsHost(rand(N * K, N + K, 0.5), N, K);
    const bias = rand(N, 9);
    const spec: GemmSpec = { K, N, lda: K, ldo: N, off: 0, bias: true, mode: "store", scale: 1, swiglu: false, rows: "M", splits: 1, w8: true };
    const out = ctx.buffer(M * N * 4);
    const got = new Float32Array(await run(ctx, [{ code: gemmCode(spec, M), buffers: [dims(ctx, M), upload(ctx, a), upload(ctx, xw.q), out, upload(ctx, bias), upload(ctx, xw.scales)], groups: gemmGroups(spec, M) }], out, M * N * 4));
    const Kp = paddedK(K);
    for (let m = 0; m < M; m++) for (let n = 0; n < N; n++) {
      let s = 0;
      for (let k = 0; k < K; k++) s += a[m * K + k] * xw.q[n * Kp + k];
      const want = s * xw.scales[n] + bias[n];
      assert.ok(Math.abs(got[m * N + n] - want) <= 1e-4 * (1 + Math.abs(want)), `${M}x${N}x${K} out[${m}, ${n}] ${got[m * N + n]} vs ${want}`);
    }
  }
});
