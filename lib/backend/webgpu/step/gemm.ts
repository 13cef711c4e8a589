/**
 * The linear layer as WGSL: out[m, off + n] (=|+=) scale · Σ_k a(m, k) · W[n, k] + bias[n], W in the
 * nn.Linear layout [N, K] as tfjs stores it. Two shapes of kernel, picked by the number of rows:
 *  - few rows (decode at small batch): memory-bound, so each weight is read once: 32 threads share one
 *    output column, reading its weight row coalesced, for all (up to 8) rows at once;
 *  - more rows: compute-bound, so the register tiles of lib/backend/webgpu/register-tile.ts: 64 rows (up
 *    to a 64-row decode batch) or 128 rows (prefill, larger batches) x 128 columns per workgroup, each
 *    thread a 4x8 or 8x8 block of accumulators.
 * The input can be the SwiGLU of a [M, 2K] gate|up buffer (silu(g)·u computed while loading), which saves
 * the down projection a separate pass. Shapes are compiled in as constants; the row count comes from the
 * shared `Dims` uniform, so one pipeline serves every batch size.
 */
import { DIMS_WGSL } from "./token-kernels.js";
import { widenWgsl, type Half } from "../half.js";
import { registerTile, type GemmTile } from "../register-tile.js";
import { paddedK } from "./int8.js";

export interface GemmSpec {
  K: number;
  N: number;
  /** Row stride of the input, in floats (2K for a SwiGLU input). */
  lda: number;
  /** Row stride and column offset of the output, in floats. */
  ldo: number;
  off: number;
  bias: boolean;
  /** "store" overwrites the output, "add" accumulates into it (residual adds, LoRA). */
  mode: "store" | "add";
  scale: number;
  /** The input is silu(a[:, :K]) · a[:, K:2K]. */
  swiglu: boolean;
  /** Which row count of Dims the input has: token rows (M) or sampled rows (R, the lm head). */
  rows: "M" | "R";
  /**
   * K is cut into this many slices, one per workgroup layer, each writing raw partial sums to
   * Part [splits, rows, N]; `reduceWgsl` then sums them and applies the epilogue. Skinny outputs (o, k, v,
   * down: N = 128..896) otherwise give a batch-64 step a few dozen workgroups on a 132-SM GPU.
   */
  splits: number;
  /**
   * The weight is 16-bit, two values packed per u32 word (lib/model/packed.ts): read as words and widened
   * in the kernel, so a decode step streams half the bytes. Absent: float32.
   */
  w16?: Half;
  /**
   * The output columns come from several weights of the same K side by side (q|k|v, gate|up): the column
   * counts of each, summing to N. One launch then does what one per weight would (at batch 1 the launches,
   * not the bytes, are the cost). Absent: one weight.
   */
  parts?: number[];
  /**
   * The weight is int8 (one part): rows of paddedK(K) values, 4 per u32 word, scaled per output column by
   * WS (lib/backend/webgpu/step/int8.ts quantizes them). Only the few-rows kernel reads it; more rows run
   * the W8A8 kernels of int8.ts.
   */
  w8?: boolean;
}

/**
 * Bindings of a linear's main kernel: 0 Dims, 1 A, 2 the first weight, 3 Out (or Part, split), then the
 * other parts' weights, then (unsplit) one bias per part. The split-K sum binds 0 Dims, 1 Part, 2 Out, then
 * the biases.
 */
export function weightBinding(part: number): number {
  return part === 0 ? 2 : 3 + part;
}

/** The column-scale binding of an int8 weight: after the bias, if any. */
export function w8ScaleBinding(s: GemmSpec): number {
  return s.bias ? 5 : 4;
}

function partsOf(s: GemmSpec): number[] {
  return s.parts ?? [s.N];
}

/** WGSL statements returning body(i, col) for the part i that output column `n` falls in, col its own column. */
function byPart(s: GemmSpec, body: (i: number, col: string) => string): string {
  const parts = partsOf(s);
  let start = 0;
  return parts
    .map((width, i) => {
      const col = start ? `(n - ${start}u)` : "n";
      start += width;
      return i < parts.length - 1 ? `if (n < ${start}u) { return ${body(i, col)}; }` : `return ${body(i, col)};`;
    })
    .join(" ");
}

/** The bias of output column n (bias bindings from `first` on). */
function biasWgsl(s: GemmSpec, first: number): string {
  const parts = partsOf(s);
  return `${parts.map((_, i) => `@group(0) @binding(${first + i}) var<storage, read> Bias${i} : array<f32>;`).join("\n")}
fn biasAt(n : u32) -> f32 { ${byPart(s, (i, col) => `Bias${i}[${col}]`)} }`;
}

/** The weight bindings, as arrays of `type`. */
function weightsWgsl(s: GemmSpec, type: string): string {
  return partsOf(s).map((_, i) => `@group(0) @binding(${weightBinding(i)}) var<storage, read> W${i} : array<${type}>;`).join("\n");
}

/** Rows at or below which the weight-streaming kernel is used. */
export const GEMV_MAX_ROWS = 8;
/** K slices are cut at multiples of this (the register tiles' depth). */
const BK = 16;

function f32(x: number): string {
  const s = Math.fround(x).toPrecision(9);
  return /[.e]/.test(s) ? s : `${s}.0`;
}

/** Declarations every kernel shape shares; with `ownW` the kernel binds the weight itself (vector loads). */
function common(s: GemmSpec, ownW = false): string {
  const load = s.swiglu
    ? `fn loadA(m : u32, k : u32) -> f32 { let g = A[m * LDA + k]; return g / (1.0 + exp(-g)) * A[m * LDA + K + k]; }`
    : `fn loadA(m : u32, k : u32) -> f32 { return A[m * LDA + k]; }`;
  const bias = s.bias ? " + biasAt(n)" : "";
  const write = s.mode === "add" ? "Out[i] = Out[i] + v;" : "Out[i] = v;";
  const P = partsOf(s).length;
  const wScale = s.w8 ? " * WS[n]" : "";
  return `${DIMS_WGSL}
const K = ${s.K}u;
const N = ${s.N}u;
const LDA = ${s.lda}u;
const LDO = ${s.ldo}u;
const OFF = ${s.off}u;
const KC = ${sliceOf(s)}u;
@group(0) @binding(1) var<storage, read> A : array<f32>;
${ownW ? "" : s.w16 ? `${weightsWgsl(s, "u32")}
${partsOf(s).map((_, i) => `fn w16_${i}(e : u32) -> f32 { let w = W${i}[e >> 1u]; return ${widenWgsl(s.w16!, "w", "(e & 1u)")}; }`).join("\n")}
fn wAt(n : u32, k : u32) -> f32 { ${byPart(s, (i, col) => `w16_${i}(${col} * K + k)`)} }` : `${weightsWgsl(s, "f32")}
fn wAt(n : u32, k : u32) -> f32 { ${byPart(s, (i, col) => `W${i}[${col} * K + k]`)} }`}
@group(0) @binding(3) var<storage, read_write> Out : array<f32>;
${s.bias && s.splits === 1 ? biasWgsl(s, 3 + P) : ""}
${s.w8 ? `@group(0) @binding(${w8ScaleBinding(s)}) var<storage, read> WS : array<f32>;` : ""}
${load}
fn store(m : u32, n : u32, acc : f32, z : u32) {
  ${s.splits > 1 ? `Out[(z * dims.${s.rows} + m) * N + n] = acc;` : `let v = acc${wScale} * ${f32(s.scale)}${bias};
  let i = m * LDO + OFF + n;
  ${write}`}
}`;
}

/** Weight vec4 a lane loads per iteration of the few-rows kernel: loads in flight before the first use. */
const GEMV_UNROLL = 4;

/** The few-rows kernel's layout: lanes sharing one output column (a power of two, 32..256) and columns per workgroup. */
export function gemvLayout(K: number, w8 = false): { vec: number; lanes: number; cols: number } {
  // vec4 loads need rows of whole vec4s (every real shape; tiny test shapes and LoRA ranks may not);
  // int8 rows are padded to whole words
  if (w8) K = paddedK(K);
  const vec = w8 || K % 4 === 0 ? 4 : 1;
  // enough lanes that each loads at least GEMV_UNROLL vectors of its weight row
  let lanes = 32;
  while (lanes < 256 && lanes * 2 * GEMV_UNROLL <= K / vec) lanes *= 2;
  return { vec, lanes, cols: 256 / lanes };
}

/**
 * WGSL of the few-rows kernel: a workgroup of 256 threads covers 256/lanes output columns; the lanes of a
 * column stride over its weight row in vec4 loads (GEMV_UNROLL in flight), multiply them into every row's
 * accumulator, and sum across lanes in workgroup memory. Nothing is split across workgroups, so there is
 * no second pass.
 */
export function gemvWgsl(s: GemmSpec): string {
  const { vec, lanes, cols } = gemvLayout(s.K, s.w8);
  const V = (s.w8 ? paddedK(s.K) : s.K) / vec;
  const wv = s.w8 ? `${weightsWgsl(s, "u32")}
fn wv(n : u32, v : u32) -> vec4<f32> { return vec4<f32>(unpack4xI8(W0[n * ${V}u + v])); }`
    : vec === 1 ? `fn wv(n : u32, v : u32) -> vec4<f32> { return vec4<f32>(wAt(n, v), 0.0, 0.0, 0.0); }`
    : s.w16 ? `${weightsWgsl(s, "vec2<u32>")}
fn widen4(p : vec2<u32>) -> vec4<f32> { return vec4<f32>(${widenWgsl(s.w16, "p.x", "0u")}, ${widenWgsl(s.w16, "p.x", "1u")}, ${widenWgsl(s.w16, "p.y", "0u")}, ${widenWgsl(s.w16, "p.y", "1u")}); }
fn wv(n : u32, v : u32) -> vec4<f32> { ${byPart(s, (i, col) => `widen4(W${i}[${col} * ${V}u + v])`)} }`
    : `${weightsWgsl(s, "vec4<f32>")}
fn wv(n : u32, v : u32) -> vec4<f32> { ${byPart(s, (i, col) => `W${i}[${col} * ${V}u + v]`)} }`;
  const av = vec === 1 ? `fn av(m : u32, v : u32) -> vec4<f32> { return vec4<f32>(loadA(m, v), 0.0, 0.0, 0.0); }`
    : s.w8 && paddedK(s.K) !== s.K ? `fn ak(m : u32, k : u32) -> f32 { if (k < K) { return loadA(m, k); } return 0.0; }
fn av(m : u32, v : u32) -> vec4<f32> { let k = 4u * v; return vec4<f32>(ak(m, k), ak(m, k + 1u), ak(m, k + 2u), ak(m, k + 3u)); }`
    : `fn av(m : u32, v : u32) -> vec4<f32> { let k = 4u * v; return vec4<f32>(loadA(m, k), loadA(m, k + 1u), loadA(m, k + 2u), loadA(m, k + 3u)); }`;
  const loads = Array.from({ length: GEMV_UNROLL }, (_, j) => `let v${j} = v + ${j * lanes}u; var w${j} = vec4<f32>(0.0); if (v${j} < ${V}u) { w${j} = wv(n, v${j}); }`).join("\n      ");
  const fmas = Array.from({ length: GEMV_UNROLL }, (_, j) => `if (v${j} < ${V}u) { a = a + dot(av(r, v${j}), w${j}); }`).join("\n          ");
  return `${common(s, vec === 4 || s.w8)}
${wv}
${av}
const R = ${GEMV_MAX_ROWS}u;
var<workgroup> red : array<f32, ${GEMV_MAX_ROWS * 256}>;
@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wg : vec3<u32>, @builtin(local_invocation_index) t : u32) {
  let M = min(dims.${s.rows}, R);
  let lane = t % ${lanes}u;
  // the column groups fold into y past 65535 workgroups (a vocabulary-wide head)
  let n = (wg.x + wg.y * 65535u) * ${cols}u + t / ${lanes}u;
  var acc : array<f32, ${GEMV_MAX_ROWS}>;
  if (n < N) {
    for (var v = lane; v < ${V}u; v = v + ${lanes * GEMV_UNROLL}u) {
      ${loads}
      for (var r = 0u; r < R; r = r + 1u) {
        if (r < M) {
          var a = acc[r];
          ${fmas}
          acc[r] = a;
        }
      }
    }
  }
  for (var r = 0u; r < R; r = r + 1u) { red[r * 256u + t] = acc[r]; }
  workgroupBarrier();
  for (var s = ${lanes / 2}u; s > 0u; s = s >> 1u) {
    if (lane < s) {
      for (var r = 0u; r < R; r = r + 1u) { red[r * 256u + t] = red[r * 256u + t] + red[r * 256u + t + s]; }
    }
    workgroupBarrier();
  }
  if (lane == 0u && n < N) {
    for (var r = 0u; r < M; r = r + 1u) { store(r, n, red[r * 256u + t], 0u); }
  }
}`;
}

/** The register tiles of more rows: a 64-row tile up to 64 rows (a decode batch), 128 rows above. */
const TILE_ROWS64: GemmTile = { name: "step64", BM: 64, BN: 128, TM: 4, TN: 8, BK: 16 };
const TILE_ROWS128: GemmTile = { name: "step128", BM: 128, BN: 128, TM: 8, TN: 8, BK: 16 };

/** The tile a linear over `rows` rows (more than GEMV_MAX_ROWS) runs on. */
export function tileFor(rows: number): GemmTile {
  return rows <= 64 ? TILE_ROWS64 : TILE_ROWS128;
}

/** WGSL of the tiled kernel (lib/backend/webgpu/register-tile.ts): a BM x BN tile per workgroup of 256 threads. */
export function tiledWgsl(s: GemmSpec, rows: number): string {
  const t = tileFor(rows);
  const tile = registerTile(t, (m, k) => `ldA(${m}, ${k}, kEnd)`, (k, n) => `ldW(${n}, ${k}, kEnd)`, "k", "k");
  const store = tile.outputs.map((o) => `{ let m = ${o.m}; let n = ${o.n};
    if (m < Mrows) { for (var q = 0u; q < 4u; q = q + 1u) { if (n + q < N) { store(m, n + q, ${o.acc}[q], wg.z); } } } }`);
  return `${common(s)}
${tile.shared}
var<private> Mrows : u32;
fn ldA(m : u32, k : u32, kEnd : u32) -> f32 { if (m < Mrows && k < kEnd) { return loadA(m, k); } return 0.0; }
fn ldW(n : u32, k : u32, kEnd : u32) -> f32 { if (n < N && k < kEnd) { return wAt(n, k); } return 0.0; }
@compute @workgroup_size(${tile.threads})
fn main(@builtin(workgroup_id) wg : vec3<u32>, @builtin(local_invocation_index) tid : u32) {
  Mrows = dims.${s.rows};
  let tx = tid % ${tile.WX}u;
  let ty = tid / ${tile.WX}u;
  let n0 = wg.x * ${t.BN}u;
  let m0 = wg.y * ${t.BM}u;
  let kBegin = wg.z * KC;
  let kEnd = min(K, kBegin + KC);
  ${tile.locals}
  var k0 = kBegin;
  ${tile.load}
  let tiles = (kEnd - kBegin + ${t.BK - 1}u) / ${t.BK}u;
  for (var i = 0u; i < tiles; i = i + 1u) {
    workgroupBarrier();
    ${tile.stage}
    workgroupBarrier();
    k0 = k0 + ${t.BK}u;
    if (k0 < kEnd) {
      ${tile.load}
    }
    for (var kk = 0u; kk < ${t.BK}u; kk = kk + 1u) {
      ${tile.step}
    }
  }
  ${store.join("\n  ")}
}`;
}

/** K per slice: a multiple of the tile depth, so slices never split a staged K block. */
function sliceOf(s: GemmSpec): number {
  return Math.ceil(s.K / s.splits / BK) * BK;
}

/**
 * Workgroups that keep the H200's 132 SMs busy: a tiled linear with fewer gets K split across more (the
 * few-rows kernel never splits: its lanes spread K within one workgroup). The register tiles hold 32-64
 * accumulators a thread, so two of their workgroups fill a core.
 */
const TARGET_TILE_GROUPS = 264;

/** How many K slices a linear over `rows` rows gets (1: none): enough workgroups, slices of at least 64. */
export function splitsFor(K: number, N: number, rows: number): number {
  if (rows <= GEMV_MAX_ROWS) return 1;
  const t = tileFor(rows);
  const tiles = Math.ceil(N / t.BN) * Math.ceil(rows / t.BM);
  return Math.max(1, Math.min(16, Math.floor(TARGET_TILE_GROUPS / tiles), Math.floor(K / 64)));
}

/**
 * out[m, off + n] (=|+=) scale · Σ_z Part[z, m, n] + bias[n], one thread per output. Bindings: 1 Part,
 * 2 Out, 3.. the biases (when the spec has them).
 */
export function reduceWgsl(s: GemmSpec): string {
  const bias = s.bias ? " + biasAt(n)" : "";
  return `${DIMS_WGSL}
@group(0) @binding(1) var<storage, read> Part : array<f32>;
@group(0) @binding(2) var<storage, read_write> Out : array<f32>;
${s.bias ? biasWgsl(s, 3) : ""}
@compute @workgroup_size(256)
fn main(@builtin(global_invocation_id) g : vec3<u32>, @builtin(num_workgroups) nw : vec3<u32>) {
  let rows = dims.${s.rows};
  let e = g.x + g.y * nw.x * 256u;
  if (e >= rows * ${s.N}u) { return; }
  let m = e / ${s.N}u;
  let n = e % ${s.N}u;
  var acc = 0.0;
  for (var z = 0u; z < ${s.splits}u; z = z + 1u) { acc = acc + Part[(z * rows + m) * ${s.N}u + n]; }
  let v = acc * ${f32(s.scale)}${bias};
  let i = m * ${s.ldo}u + ${s.off}u + n;
  ${s.mode === "add" ? "Out[i] = Out[i] + v;" : "Out[i] = v;"}
}`;
}

/** The kernel shape a linear over `rows` rows runs (one pipeline per shape and spec). */
export function kernelShape(rows: number): string {
  return rows <= GEMV_MAX_ROWS ? "gemv" : tileFor(rows).name;
}

/** The WGSL of a linear layer over `rows` input rows (the kernel shape depends on the count). */
export function gemmCode(s: GemmSpec, rows: number): string {
  return rows <= GEMV_MAX_ROWS ? gemvWgsl(s) : tiledWgsl(s, rows);
}

/** The workgroup counts of a linear layer over `rows` input rows. */
export function gemmGroups(s: GemmSpec, rows: number): [number, number, number] {
  if (rows <= GEMV_MAX_ROWS) {
    const n = Math.ceil(s.N / gemvLayout(s.K, s.w8).cols);
    return n <= 65535 ? [n, 1, 1] : [65535, Math.ceil(n / 65535), 1];
  }
  const t = tileFor(rows);
  return [Math.ceil(s.N / t.BN), Math.ceil(rows / t.BM), s.splits];
}
