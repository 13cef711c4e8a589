/**
 * The linear layer as WGSL: out[m, off + n] (=|+=) scale · Σ_k a(m, k) · W[n, k] + bias[n], W in the
 * nn.Linear layout [N, K] as tfjs stores it. Two shapes of kernel, picked by the number of rows:
 *  - few rows (decode at small batch): memory-bound, so each weight is read once: 32 threads share one
 *    output column, reading its weight row coalesced, for all (up to 8) rows at once;
 *  - more rows: a 64x64 output tile per workgroup from 16-deep K slices staged in workgroup memory, each
 *    thread holding a 4x4 block of accumulators (strided so neighbouring threads touch neighbouring
 *    words in workgroup memory and in the output).
 * The input can be the SwiGLU of a [M, 2K] gate|up buffer (silu(g)·u computed while loading), which saves
 * the down projection a separate pass. Shapes are compiled in as constants; the row count comes from the
 * shared `Dims` uniform, so one pipeline serves every batch size.
 */
import { DIMS_WGSL } from "./token-kernels.js";
import { widenWgsl, type Half } from "../half.js";

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
}

/** Rows at or below which the weight-streaming kernel is used. */
export const GEMV_MAX_ROWS = 8;
const TILE = 64;
const BK = 16;
const GEMV_COLS = 8;

function f32(x: number): string {
  const s = Math.fround(x).toPrecision(9);
  return /[.e]/.test(s) ? s : `${s}.0`;
}

function common(s: GemmSpec): string {
  const load = s.swiglu
    ? `fn loadA(m : u32, k : u32) -> f32 { let g = A[m * LDA + k]; return g / (1.0 + exp(-g)) * A[m * LDA + K + k]; }`
    : `fn loadA(m : u32, k : u32) -> f32 { return A[m * LDA + k]; }`;
  const bias = s.bias ? " + Bias[n]" : "";
  const write = s.mode === "add" ? "Out[i] = Out[i] + v;" : "Out[i] = v;";
  return `${DIMS_WGSL}
const K = ${s.K}u;
const N = ${s.N}u;
const LDA = ${s.lda}u;
const LDO = ${s.ldo}u;
const OFF = ${s.off}u;
const KC = ${sliceOf(s)}u;
@group(0) @binding(1) var<storage, read> A : array<f32>;
${s.w16 ? `@group(0) @binding(2) var<storage, read> W : array<u32>;
fn wAt(n : u32, k : u32) -> f32 { let e = n * K + k; let w = W[e >> 1u]; return ${widenWgsl(s.w16, "w", "(e & 1u)")}; }` : `@group(0) @binding(2) var<storage, read> W : array<f32>;
fn wAt(n : u32, k : u32) -> f32 { return W[n * K + k]; }`}
@group(0) @binding(3) var<storage, read_write> Out : array<f32>;
${s.bias && s.splits === 1 ? "@group(0) @binding(4) var<storage, read> Bias : array<f32>;" : ""}
${load}
fn store(m : u32, n : u32, acc : f32, z : u32) {
  ${s.splits > 1 ? `Out[(z * dims.${s.rows} + m) * N + n] = acc;` : `let v = acc * ${f32(s.scale)}${bias};
  let i = m * LDO + OFF + n;
  ${write}`}
}`;
}

/** WGSL of the few-rows kernel: workgroup = 8 columns x 32 lanes over K. */
export function gemvWgsl(s: GemmSpec): string {
  return `${common(s)}
const R = ${GEMV_MAX_ROWS}u;
var<workgroup> red : array<f32, ${GEMV_MAX_ROWS * 256}>;
@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wg : vec3<u32>, @builtin(local_invocation_index) t : u32) {
  let M = min(dims.${s.rows}, R);
  let lane = t % 32u;
  let n = wg.x * ${GEMV_COLS}u + t / 32u;
  var acc : array<f32, ${GEMV_MAX_ROWS}>;
  if (n < N) {
    let kend = min(K, (wg.y + 1u) * KC);
${s.w16 ? `    // a word per lane: the pair (k, k + 1) from one coalesced 4-byte load (K and KC are even)
    for (var k = wg.y * KC + 2u * lane; k < kend; k = k + 64u) {
      let word = W[(n * K + k) >> 1u];
      let w0 = ${widenWgsl(s.w16, "word", "0u")};
      let w1 = ${widenWgsl(s.w16, "word", "1u")};
      for (var r = 0u; r < R; r = r + 1u) {
        if (r < M) { acc[r] = acc[r] + loadA(r, k) * w0 + loadA(r, k + 1u) * w1; }
      }
    }` : `    for (var k = wg.y * KC + lane; k < kend; k = k + 32u) {
      let w = wAt(n, k);
      for (var r = 0u; r < R; r = r + 1u) {
        if (r < M) { acc[r] = acc[r] + loadA(r, k) * w; }
      }
    }`}
  }
  for (var r = 0u; r < R; r = r + 1u) { red[r * 256u + t] = acc[r]; }
  workgroupBarrier();
  for (var s = 16u; s > 0u; s = s >> 1u) {
    if (lane < s) {
      for (var r = 0u; r < R; r = r + 1u) { red[r * 256u + t] = red[r * 256u + t] + red[r * 256u + t + s]; }
    }
    workgroupBarrier();
  }
  if (lane == 0u && n < N) {
    for (var r = 0u; r < M; r = r + 1u) { store(r, n, red[r * 256u + t], wg.y); }
  }
}`;
}

/** WGSL of the tiled kernel: a 64x64 tile per workgroup, 256 threads of 4x4 accumulators. */
export function tiledWgsl(s: GemmSpec): string {
  return `${common(s)}
const BM = ${TILE}u;
const BK = ${BK}u;
var<workgroup> As : array<f32, ${TILE * BK}>;
var<workgroup> Ws : array<f32, ${TILE * BK}>;
@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wg : vec3<u32>, @builtin(local_invocation_index) t : u32) {
  let M = dims.${s.rows};
  let m0 = wg.y * BM;
  let kend = min(K, (wg.z + 1u) * KC);
  let n0 = wg.x * BM;
  let tx = t % 16u;
  let ty = t / 16u;
  var acc : array<f32, 16>;
  for (var k0 = wg.z * KC; k0 < kend; k0 = k0 + BK) {
    for (var i = 0u; i < 4u; i = i + 1u) {
      let e = t + 256u * i;
      let row = e / BK;
      let kk = e % BK;
      let k = k0 + kk;
      let m = m0 + row;
      var a = 0.0;
      if (m < M && k < kend) { a = loadA(m, k); }
      As[kk * BM + row] = a;
      let n = n0 + row;
      var w = 0.0;
      if (n < N && k < kend) { w = wAt(n, k); }
      Ws[kk * BM + row] = w;
    }
    workgroupBarrier();
    for (var kk = 0u; kk < BK; kk = kk + 1u) {
      var a : array<f32, 4>;
      var b : array<f32, 4>;
      for (var i = 0u; i < 4u; i = i + 1u) {
        a[i] = As[kk * BM + ty + 16u * i];
        b[i] = Ws[kk * BM + tx + 16u * i];
      }
      for (var i = 0u; i < 4u; i = i + 1u) {
        for (var j = 0u; j < 4u; j = j + 1u) { acc[i * 4u + j] = acc[i * 4u + j] + a[i] * b[j]; }
      }
    }
    workgroupBarrier();
  }
  for (var i = 0u; i < 4u; i = i + 1u) {
    let m = m0 + ty + 16u * i;
    for (var j = 0u; j < 4u; j = j + 1u) {
      let n = n0 + tx + 16u * j;
      if (m < M && n < N) { store(m, n, acc[i * 4u + j], wg.z); }
    }
  }
}`;
}

/** K per slice: a multiple of the tile depth, so slices never split a staged K block. */
function sliceOf(s: GemmSpec): number {
  return Math.ceil(s.K / s.splits / BK) * BK;
}

/** Workgroups that keep the H200's 132 SMs busy; fewer tiles than this get K split across more. */
const TARGET_GROUPS = 528;

/** How many K slices a linear over `rows` rows gets (1: none): enough workgroups, slices of at least 64. */
export function splitsFor(K: number, N: number, rows: number): number {
  const tiles = rows <= GEMV_MAX_ROWS ? Math.ceil(N / GEMV_COLS) : Math.ceil(N / TILE) * Math.ceil(rows / TILE);
  return Math.max(1, Math.min(16, Math.floor(TARGET_GROUPS / tiles), Math.floor(K / 32)));
}

/**
 * out[m, off + n] (=|+=) scale · Σ_z Part[z, m, n] + bias[n], one thread per output. Bindings: 1 Part,
 * 2 Out, 3 Bias (when the spec has one).
 */
export function reduceWgsl(s: GemmSpec): string {
  const bias = s.bias ? " + Bias[n]" : "";
  return `${DIMS_WGSL}
@group(0) @binding(1) var<storage, read> Part : array<f32>;
@group(0) @binding(2) var<storage, read_write> Out : array<f32>;
${s.bias ? "@group(0) @binding(3) var<storage, read> Bias : array<f32>;" : ""}
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

/** The WGSL of a linear layer over `rows` input rows (the kernel shape depends on the count). */
export function gemmCode(s: GemmSpec, rows: number): string {
  return rows <= GEMV_MAX_ROWS ? gemvWgsl(s) : tiledWgsl(s);
}

/** The workgroup counts of a linear layer over `rows` input rows. */
export function gemmGroups(s: GemmSpec, rows: number): [number, number, number] {
  if (rows <= GEMV_MAX_ROWS) return [Math.ceil(s.N / GEMV_COLS), s.splits, 1];
  return [Math.ceil(s.N / TILE), Math.ceil(rows / TILE), s.splits];
}
