/**
 * The linear layer's GEMM in int8 against the kit's float32 step GEMM, side by side on one device: for each
 * shape the int8 GEMM alone (TOPS), the whole int8 linear (row quantization + GEMM + dequantizing epilogue),
 * and the float32 kernel the step runner uses (TFLOP/s), with the int8 integers checked exactly against the
 * CPU and the int8 linear's output against the float32 one (relative rms error: W8A8's quantization error).
 *   npm run bench:gemm                          the decode, prefill and 4096^3 shapes (a GPU host)
 *   npm run bench:gemm -- --shapes 64x896x4864  M x N x K, comma-separated
 *   T2S_INT8_MMA=portable npm run bench:gemm -- --shapes 64x128x256 --reps 2   plain WGSL (any adapter)
 * Flags: --shapes LIST  --reps N (timed calls per figure, default 20)  --json
 * The H200's SM clock idles at 345 MHz and needs ~0.2 s of load to reach full speed: every timing is
 * preceded by a second of the same work, and calls run back to back in one submission.
 */
import { useBackend } from "../lib/backend/select.js";
import { tf } from "../lib/backend/tf.js";
import { int8Support } from "../lib/backend/webgpu/int8-support.js";
import { type Dispatch, GpuContext } from "../lib/backend/webgpu/step/device.js";
import { gemmCode, gemmGroups, reduceWgsl, splitsFor, type GemmSpec } from "../lib/backend/webgpu/step/gemm.js";
import { int8EpilogueWgsl, int8GemmGroups, int8GemmWgsl, int8SplitsFor, int8TileFor, paddedK, quantizeRowsWgsl, resultRows, resultStride, tileRows } from "../lib/backend/webgpu/step/int8.js";
import { mulberry32 } from "../lib/core/random.js";
import { flag, intFlag, printTable } from "./args.js";

const DEFAULT_SHAPES = "1x896x4864,64x896x4864,64x9728x896,256x4864x896,1024x9728x896,64x3584x18944,256x37888x3584,4096x4096x4096";

function randoms(n: number, seed: number): Float32Array {
  const r = mulberry32(seed);
  const a = new Float32Array(n);
  for (let i = 0; i < n; i++) a[i] = r() * 2 - 1;
  return a;
}

async function main(): Promise<void> {
  await useBackend(flag("--backend") ?? "webgpu");
  if (tf.getBackend() !== "webgpu") throw new Error("bench:gemm needs the webgpu backend");
  const support = int8Support();
  if (!support.mma) throw new Error(`no int8 path on this device: ${support.why} (T2S_INT8_MMA=portable runs the plain-WGSL form)`);
  const ctx = new GpuContext();
  const reps = intFlag("--reps", 20);
  const shapes = (flag("--shapes") ?? DEFAULT_SHAPES).split(",").map((s) => s.split("x").map(Number) as [number, number, number]);
  const rows: string[][] = [];
  const json: Record<string, unknown>[] = [];
  process.stderr.write(`int8 path: ${support.why}\n`);
  for (const [M, N, K] of shapes) {
    const Kp = paddedK(K);
    const dims = ctx.buffer(16, GPUBufferUsage.UNIFORM | GPUBufferUsage.COPY_DST);
    ctx.device.queue.writeBuffer(dims, 0, new Uint32Array([M, M, 0, 0]));
    const af = randoms(M * K, 1);
    const wf = randoms(N * K, 2);
    const upload = (d: ArrayBufferView) => {
      const b = ctx.buffer(d.byteLength);
      for (let o = 0; o < d.byteLength; o += 1 << 26) ctx.device.queue.writeBuffer(b, o, d.buffer, d.byteOffset + o, Math.min(1 << 26, d.byteLength - o));
      return b;
    };
    const A = upload(af);
    const W = upload(wf);
    // int8: weights quantized on the device, as the runner does
    const qw = ctx.buffer(N * Kp);
    const sw = ctx.buffer(N * 4);
    const qa = ctx.buffer(M * Kp);
    const sa = ctx.buffer(M * 4);
    const tile = int8TileFor(M);
    const splits = int8SplitsFor(K, N, M);
    const C = ctx.buffer(splits * resultRows(M, tile) * resultStride(N, tile) * 4);
    const out8 = ctx.buffer(M * N * 4);
    const out32 = ctx.buffer(M * N * 4);
    const spec = { K, N, rows: "M" as const, splits };
    const quantW: Dispatch = { label: "qw", pipeline: ctx.pipeline(quantizeRowsWgsl({ kind: "weight", rows: N, K, off: 0 })), buffers: [W, qw, sw], groups: GpuContext.groups1d(N) };
    const quantA: Dispatch = { label: "qa", pipeline: ctx.pipeline(quantizeRowsWgsl({ kind: "activation", rows: "M", K, lda: K, swiglu: false })), buffers: [dims, A, qa, sa], groups: GpuContext.groups1d(M) };
    const gemm: Dispatch = { label: "gemm", pipeline: ctx.pipeline(int8GemmWgsl(spec, M, support.mma)), buffers: [dims, qa, qw, C], groups: int8GemmGroups(spec, M) };
    const epi: Dispatch = { label: "epi", pipeline: ctx.pipeline(int8EpilogueWgsl({ N, rows: "M", splits, stride: resultStride(N, tile), tileRows: tileRows(tile), ldo: N, off: 0, scale: 1, bias: false, mode: "store" })), buffers: [dims, C, sa, sw, out8], groups: GpuContext.groups1d(Math.ceil((M * N) / 256)) };
    // float32: the step runner's kernel for M rows
    const s32: GemmSpec = { K, N, lda: K, ldo: N, off: 0, bias: false, mode: "store", scale: 1, swiglu: false, rows: "M", splits: splitsFor(K, N, M) };
    const fp32: Dispatch[] = [];
    if (s32.splits === 1) fp32.push({ label: "fp32", pipeline: ctx.pipeline(gemmCode(s32, M)), buffers: [dims, A, W, out32], groups: gemmGroups(s32, M) });
    else {
      const part = ctx.buffer(s32.splits * M * N * 4);
      fp32.push({ label: "fp32", pipeline: ctx.pipeline(gemmCode(s32, M)), buffers: [dims, A, W, part], groups: gemmGroups(s32, M) });
      fp32.push({ label: "fp32 sum", pipeline: ctx.pipeline(reduceWgsl(s32)), buffers: [dims, part, out32], groups: GpuContext.groups1d(Math.ceil((M * N) / 256)) });
    }
    const submit = (list: Dispatch[]) => {
      const enc = ctx.device.createCommandEncoder();
      ctx.encode(enc, list);
      ctx.device.queue.submit([enc.finish()]);
    };
    submit([quantW, quantA, gemm, epi, ...fp32]);
    await ctx.device.queue.onSubmittedWorkDone();
    /** ms per call: about a second of the same calls first (the clock), then `reps` back to back. */
    const time = async (list: Dispatch[]): Promise<number> => {
      let t0 = performance.now();
      submit(list);
      await ctx.device.queue.onSubmittedWorkDone();
      const once = Math.max(1e-3, performance.now() - t0);
      submit(Array.from({ length: Math.min(2000, Math.ceil(1000 / once)) }, () => list).flat());
      await ctx.device.queue.onSubmittedWorkDone();
      t0 = performance.now();
      submit(Array.from({ length: reps }, () => list).flat());
      await ctx.device.queue.onSubmittedWorkDone();
      return (performance.now() - t0) / reps;
    };
    const msGemm = await time([gemm]);
    const msLinear = await time([quantA, gemm, epi]);
    const ms32 = await time(fp32);
    // exactness of the integers at a few sampled outputs, and the int8 linear against float32
    const read = async (b: GPUBuffer, bytes: number) => {
      const enc = ctx.device.createCommandEncoder();
      const r = ctx.readBack(enc, b, bytes);
      ctx.device.queue.submit([enc.finish()]);
      return r();
    };
    const qA = new Int8Array(await read(qa, M * Kp));
    const qW = new Int8Array(await read(qw, N * Kp));
    const parts = new Int32Array(await read(C, C.size));
    const MP = resultRows(M, tile);
    const NP = resultStride(N, tile);
    const rand = mulberry32(7);
    let wrong = 0;
    for (let i = 0; i < 200; i++) {
      const m = Math.floor(rand() * M);
      const n = Math.floor(rand() * N);
      let want = 0;
      for (let k = 0; k < Kp; k++) want += qA[m * Kp + k] * qW[n * Kp + k];
      let got = 0;
      for (let z = 0; z < splits; z++) got += parts[(z * MP + m) * NP + n];
      if (got !== want) wrong++;
    }
    const y8 = new Float32Array(await read(out8, M * N * 4));
    const y32 = new Float32Array(await read(out32, M * N * 4));
    let se = 0;
    let ss = 0;
    for (let i = 0; i < y32.length; i++) {
      se += (y8[i] - y32[i]) ** 2;
      ss += y32[i] ** 2;
    }
    const rms = Math.sqrt(se / Math.max(ss, 1e-30));
    const ops = 2 * M * N * K;
    const row = { M, N, K, splits, fp32_splits: s32.splits, int8_gemm_ms: msGemm, int8_linear_ms: msLinear, fp32_ms: ms32, int8_tops: ops / msGemm / 1e9, int8_linear_tops: ops / msLinear / 1e9, fp32_tflops: ops / ms32 / 1e9, ratio: ms32 / msLinear, wrong_of_200: wrong, rel_rms: rms };
    json.push(row);
    process.stderr.write(`row ${JSON.stringify(row)}\n`);
    rows.push([`${M}x${N}x${K}`, `${tile.name}/${splits}`, row.int8_tops.toFixed(1), row.int8_linear_tops.toFixed(1), row.fp32_tflops.toFixed(1), `${row.ratio.toFixed(2)}x`, `${wrong}/200`, rms.toExponential(2)]);
    for (const b of [dims, A, W, qw, sw, qa, sa, C, out8, out32]) b.destroy();
  }
  if (process.argv.includes("--json")) process.stdout.write(JSON.stringify({ mma: support.mma, rows: json }) + "\n");
  process.stdout.write(`int8 blocks: ${support.mma}\n`);
  printTable(["M x N x K", "int8 tile/splits", "int8 GEMM TOPS", "int8 linear TOPS", "fp32 TFLOP/s", "linear vs fp32", "int wrong", "W8A8 rel rms"], rows);
}

main().catch((e) => {
  process.stderr.write(`error [bench]: ${(e as Error).message}\n`);
  process.exit(1);
});
