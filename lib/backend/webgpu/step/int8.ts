/**
 * W8A8 linear layers as WGSL: int8 weights (symmetric, one scale per output channel), int8 activations
 * (symmetric, one scale per token row, computed on the device each call), int32 accumulation, and one
 * epilogue that sums the K slices, dequantizes and applies bias and the store/add of the layer.
 *
 * Three kernels a linear runs in turn:
 *  - `quantizeRowsWgsl`: each row's max |x| -> scale = max/127, values rounded to int8, 4 per u32 word,
 *    K padded with zeros to a multiple of INT8_K_ALIGN (so the GEMM tiles need no K bound). The same kernel
 *    quantizes weight rows once (from float32 or packed 16-bit) and activation rows every call (from the
 *    activation buffer, or the SwiGLU of a gate|up buffer);
 *  - `int8GemmWgsl`: C[z, m, n] = Σ_k A[m, k] · W[n, k] over K slice z, in 16x16x32 blocks. A and W tiles
 *    are staged in workgroup memory (32-byte rows, double-buffered); each subgroup of 32 threads owns
 *    TM x TN result blocks. On Dawn's `chromium-experimental-subgroup-matrix` the blocks run on the tensor
 *    cores; `portable` computes the same integers with dot4I8Packed in plain WGSL (any adapter: the tests
 *    run it on a software driver). The integer sums are exact, so both give identical results;
 *  - `int8EpilogueWgsl`: out[m, off + n] (=|+=) scale · f32(Σ_z C[z, m, n]) · sa[m] · sw[n] + bias[n].
 * Decode at few rows reads the int8 weights with float32 activations instead (gemm.ts, `w8`).
 */
import { DIMS_WGSL, ROW_OF } from "./token-kernels.js";
import { widenWgsl, type Half } from "../half.js";

/** How the int8 blocks are multiplied: the GPU's matrix units through subgroup matrices, or plain WGSL. */
export type MmaKind = "subgroup-matrix" | "portable";

/** Quantized rows are padded with zeros to a multiple of this many values (whole 32-byte K steps). */
export const INT8_K_ALIGN = 64;
/** K values per staged step: one 16x16x32 block product. */
const BK = 32;

export function paddedK(K: number): number {
  return Math.ceil(K / INT8_K_ALIGN) * INT8_K_ALIGN;
}

function f32(x: number): string {
  const s = Math.fround(x).toPrecision(9);
  return /[.e]/.test(s) ? s : `${s}.0`;
}

/** Where `quantizeRowsWgsl` reads its rows. */
export type QuantSource =
  /** A weight [rows, K] (float32, or 16-bit packed two per word), all of its rows; written at row `off`. */
  | { kind: "weight"; rows: number; K: number; w16?: Half; off: number }
  /** Activation rows (dims.M or dims.R of them) of stride `lda`; with `swiglu` the input is silu(a[:, :K]) · a[:, K:2K]. */
  | { kind: "activation"; rows: "M" | "R"; K: number; lda: number; swiglu: boolean };

/**
 * Quantizes rows to int8, one workgroup of 256 threads per row. Bindings: weights 0 W, 1 Q, 2 S;
 * activations 0 Dims, 1 X, 2 Q, 3 S. Q holds paddedK(K)/4 words a row, S one scale a row.
 */
export function quantizeRowsWgsl(src: QuantSource): string {
  const K = src.K;
  const KW = paddedK(K) / 4;
  let head: string;
  let rowCount: string;
  let out = "r";
  if (src.kind === "weight") {
    const read = src.w16 ? `fn xAt(r : u32, k : u32) -> f32 { let e = r * ${K}u + k; let w = X[e >> 1u]; return ${widenWgsl(src.w16, "w", "(e & 1u)")}; }` : `fn xAt(r : u32, k : u32) -> f32 { return X[r * ${K}u + k]; }`;
    head = `@group(0) @binding(0) var<storage, read> X : array<${src.w16 ? "u32" : "f32"}>;
@group(0) @binding(1) var<storage, read_write> Q : array<u32>;
@group(0) @binding(2) var<storage, read_write> S : array<f32>;
${read}`;
    rowCount = `${src.rows}u`;
    out = `(r + ${src.off}u)`;
  } else {
    const read = src.swiglu
      ? `fn xAt(r : u32, k : u32) -> f32 { let g = X[r * ${src.lda}u + k]; return g / (1.0 + exp(-g)) * X[r * ${src.lda}u + ${K}u + k]; }`
      : `fn xAt(r : u32, k : u32) -> f32 { return X[r * ${src.lda}u + k]; }`;
    head = `${DIMS_WGSL}
@group(0) @binding(1) var<storage, read> X : array<f32>;
@group(0) @binding(2) var<storage, read_write> Q : array<u32>;
@group(0) @binding(3) var<storage, read_write> S : array<f32>;
${read}`;
    rowCount = `dims.${src.rows}`;
  }
  return `${head}
var<workgroup> red : array<f32, 256>;
@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wg : vec3<u32>, @builtin(local_invocation_index) t : u32) {
  let r = ${ROW_OF};
  if (r >= ${rowCount}) { return; }
  var mx = 0.0;
  for (var k = t; k < ${K}u; k = k + 256u) { mx = max(mx, abs(xAt(r, k))); }
  red[t] = mx;
  workgroupBarrier();
  for (var s = 128u; s > 0u; s = s >> 1u) {
    if (t < s) { red[t] = max(red[t], red[t + s]); }
    workgroupBarrier();
  }
  let amax = red[0];
  let inv = select(0.0, 127.0 / amax, amax > 0.0);
  for (var j = t; j < ${KW}u; j = j + 256u) {
    var v = vec4<f32>(0.0);
    for (var q = 0u; q < 4u; q = q + 1u) {
      let k = 4u * j + q;
      if (k < ${K}u) { v[q] = xAt(r, k); }
    }
    Q[${out} * ${KW}u + j] = pack4xI8Clamp(vec4<i32>(round(v * inv)));
  }
  if (t == 0u) { S[${out}] = amax / 127.0; }
}`;
}

/** A GEMM tile: subgroups SGM x SGN per workgroup, each owning TM x TN blocks of 16 x 16 results. */
export interface Int8Tile {
  name: string;
  SGM: number;
  SGN: number;
  TM: number;
  TN: number;
}

/** Up to 64 rows (a decode batch): 64 x 64 per workgroup; more rows (prefill): 128 x 128. */
const TILE64: Int8Tile = { name: "i8x64", SGM: 2, SGN: 2, TM: 2, TN: 2 };
const TILE128: Int8Tile = { name: "i8x128", SGM: 2, SGN: 2, TM: 4, TN: 4 };

export function int8TileFor(rows: number): Int8Tile {
  return rows <= 64 ? TILE64 : TILE128;
}

export function tileRows(t: Int8Tile): number {
  return t.SGM * 16 * t.TM;
}

export function tileCols(t: Int8Tile): number {
  return t.SGN * 16 * t.TN;
}

/** The GEMM's shape: K (logical; rows are paddedK long), N outputs, rows from dims.M or dims.R, K slices. */
export interface Int8GemmSpec {
  K: number;
  N: number;
  rows: "M" | "R";
  splits: number;
}

/** Row stride of the int32 result C: N rounded up to whole tiles. */
export function resultStride(N: number, t: Int8Tile): number {
  return Math.ceil(N / tileCols(t)) * tileCols(t);
}

/** Rows of C for `rows` input rows: whole tiles. */
export function resultRows(rows: number, t: Int8Tile): number {
  return Math.ceil(rows / tileRows(t)) * tileRows(t);
}

/** Workgroups that keep 132 SMs busy; fewer tiles than this get K split across more. */
const TARGET_GROUPS = 264;

/** K slices for a GEMM over `rows` rows: enough workgroups, slices of at least 4 K steps. */
export function int8SplitsFor(K: number, N: number, rows: number): number {
  const t = int8TileFor(rows);
  const tiles = Math.ceil(N / tileCols(t)) * Math.ceil(rows / tileRows(t));
  const steps = paddedK(K) / BK;
  return Math.max(1, Math.min(16, Math.floor(TARGET_GROUPS / tiles), Math.floor(steps / 4)));
}

/** K steps per slice. */
function sliceSteps(s: Int8GemmSpec): number {
  return Math.ceil(paddedK(s.K) / BK / s.splits);
}

/** The block loads, products and stores of one MMA kind, as WGSL snippets over the tile's names. */
function mmaOps(kind: MmaKind) {
  if (kind === "subgroup-matrix") {
    return {
      header: `diagnostic(off, chromium_experimental.subgroup_matrix_uniformity);
enable subgroups;
enable chromium_experimental_subgroup_matrix;
alias LT = subgroup_matrix_left<i8, 32, 16>;
alias RT = subgroup_matrix_right<i8, 16, 32>;
alias AT = subgroup_matrix_result<i32, 16, 16>;`,
      subgroup: "@builtin(subgroup_id) sg : u32",
      acc: (name: string) => `var ${name} = AT();`,
      // A rows of 32 bytes (2 vec4) at `off`; W rows likewise, read as the columns of the right matrix
      loadA: (name: string, off: string) => `let ${name} = subgroupMatrixLoad<LT, row_major>(&As, ${off}, 2u);`,
      loadB: (name: string, off: string) => `let ${name} = subgroupMatrixLoad<RT, col_major>(&Bs, ${off}, 2u);`,
      mma: (c: string, a: string, b: string) => `${c} = subgroupMatrixMultiplyAccumulate(${a}, ${b}, ${c});`,
      store: (c: string, off: string, stride: string) => `subgroupMatrixStore<row_major>(&C, ${off}, ${c}, ${stride});`,
    };
  }
  // plain WGSL: lane l of a 32-thread group holds row l/2, columns 8(l%2)..+8 of each 16 x 16 block
  return {
    header: `fn dot16(a : vec4<i32>, b : vec4<i32>) -> i32 {
  let x = bitcast<vec4<u32>>(a);
  let y = bitcast<vec4<u32>>(b);
  return dot4I8Packed(x.x, y.x) + dot4I8Packed(x.y, y.y) + dot4I8Packed(x.z, y.z) + dot4I8Packed(x.w, y.w);
}
fn mmaEmu(ao : u32, bo : u32, c : array<i32, 8>, lane : u32) -> array<i32, 8> {
  var r = c;
  let row = lane / 2u;
  let a0 = As[ao + 2u * row];
  let a1 = As[ao + 2u * row + 1u];
  for (var j = 0u; j < 8u; j = j + 1u) {
    let col = 8u * (lane % 2u) + j;
    r[j] = r[j] + dot16(a0, Bs[bo + 2u * col]) + dot16(a1, Bs[bo + 2u * col + 1u]);
  }
  return r;
}`,
    subgroup: "",
    acc: (name: string) => `var ${name} : array<i32, 8>;`,
    loadA: (name: string, off: string) => `let ${name} = ${off};`,
    loadB: (name: string, off: string) => `let ${name} = ${off};`,
    mma: (c: string, a: string, b: string) => `${c} = mmaEmu(${a}, ${b}, ${c}, lane);`,
    store: (c: string, off: string, stride: string) => `for (var j = 0u; j < 8u; j = j + 1u) { C[${off} + (lane / 2u) * ${stride} + 8u * (lane % 2u) + j] = ${c}[j]; }`,
  };
}

/**
 * C[z, m, n] = Σ_{k in slice z} A[m, k] · W[n, k] as int32, for every (m, n) of whole tiles (rows past the
 * input's and columns past N come out 0). Bindings: 0 Dims, 1 A (int8 rows, vec4<i32> view), 2 W (the
 * same), 3 C [splits, resultRows, resultStride] int32.
 */
export function int8GemmWgsl(s: Int8GemmSpec, rows: number, kind: MmaKind): string {
  const t = int8TileFor(rows);
  const BM = tileRows(t);
  const BN = tileCols(t);
  const NT = 32 * t.SGM * t.SGN;
  const KV = paddedK(s.K) / 16;
  const NP = resultStride(s.N, t);
  const steps = paddedK(s.K) / BK;
  const SPS = sliceSteps(s);
  const ops = mmaOps(kind);
  // each staged row is 2 vec4 (32 bytes); a thread stages PA of A's and PB of W's per step
  const PA = (2 * BM) / NT;
  const PB = (2 * BN) / NT;
  const locals: string[] = [];
  const loads: string[] = [];
  const stages: string[] = [];
  for (let p = 0; p < PA; p++) {
    locals.push(`var ra${p} : vec4<i32>;`);
    loads.push(`{ let e = tid + ${NT * p}u; let m = m0 + e / 2u; ra${p} = vec4<i32>(0); if (m < rows) { ra${p} = A[m * ${KV}u + 2u * ks + e % 2u]; } }`);
    stages.push(`As[buf * ${2 * BM}u + tid + ${NT * p}u] = ra${p};`);
  }
  for (let p = 0; p < PB; p++) {
    locals.push(`var rb${p} : vec4<i32>;`);
    loads.push(`{ let e = tid + ${NT * p}u; let n = n0 + e / 2u; rb${p} = vec4<i32>(0); if (n < ${s.N}u) { rb${p} = W[n * ${KV}u + 2u * ks + e % 2u]; } }`);
    stages.push(`Bs[buf * ${2 * BN}u + tid + ${NT * p}u] = rb${p};`);
  }
  const blocks: string[] = [];
  const accs: string[] = [];
  const stores: string[] = [];
  for (let i = 0; i < t.TM; i++) blocks.push(ops.loadA(`a${i}`, `cb * ${2 * BM}u + (smr + ${16 * i}u) * 2u`));
  for (let j = 0; j < t.TN; j++) blocks.push(ops.loadB(`b${j}`, `cb * ${2 * BN}u + (snr + ${16 * j}u) * 2u`));
  for (let i = 0; i < t.TM; i++) {
    for (let j = 0; j < t.TN; j++) {
      accs.push(ops.acc(`c${i}_${j}`));
      blocks.push(ops.mma(`c${i}_${j}`, `a${i}`, `b${j}`));
      stores.push(ops.store(`c${i}_${j}`, `(wg.z * MP + m0 + smr + ${16 * i}u) * ${NP}u + n0 + snr + ${16 * j}u`, `${NP}u`));
    }
  }
  return `${ops.header}
${DIMS_WGSL}
@group(0) @binding(1) var<storage, read> A : array<vec4<i32>>;
@group(0) @binding(2) var<storage, read> W : array<vec4<i32>>;
@group(0) @binding(3) var<storage, read_write> C : array<i32>;
var<workgroup> As : array<vec4<i32>, ${4 * BM}>;
var<workgroup> Bs : array<vec4<i32>, ${4 * BN}>;
@compute @workgroup_size(${NT})
fn main(@builtin(workgroup_id) wg : vec3<u32>, @builtin(local_invocation_index) tid : u32${ops.subgroup ? `, ${ops.subgroup}` : ""}) {
  let rows = dims.${s.rows};
  let MP = (rows + ${BM - 1}u) / ${BM}u * ${BM}u;
  let group = ${ops.subgroup ? "sg" : "tid / 32u"};
  let lane = tid % 32u;
  let m0 = wg.y * ${BM}u;
  let n0 = wg.x * ${BN}u;
  let smr = (group / ${t.SGN}u) * ${16 * t.TM}u;
  let snr = (group % ${t.SGN}u) * ${16 * t.TN}u;
  let first = wg.z * ${SPS}u;
  let last = min(${steps}u, first + ${SPS}u);
  let steps = select(0u, last - first, first < last);
  ${locals.join("\n  ")}
  ${accs.join("\n  ")}
  var ks = first;
  var buf = 0u;
  if (steps > 0u) {
    ${loads.join("\n    ")}
    ${stages.join("\n    ")}
  }
  workgroupBarrier();
  for (var i = 0u; i < steps; i = i + 1u) {
    let cb = i & 1u;
    let more = i + 1u < steps;
    if (more) {
      ks = ks + 1u;
      ${loads.join("\n      ")}
    }
    ${blocks.join("\n    ")}
    if (more) {
      buf = cb ^ 1u;
      ${stages.join("\n      ")}
    }
    workgroupBarrier();
  }
  ${stores.join("\n  ")}
}`;
}

/** Workgroups of the GEMM over `rows` rows. */
export function int8GemmGroups(s: Int8GemmSpec, rows: number): [number, number, number] {
  const t = int8TileFor(rows);
  return [Math.ceil(s.N / tileCols(t)), Math.ceil(rows / tileRows(t)), s.splits];
}

/** What the epilogue does with each dequantized output. */
export interface Int8Epilogue {
  N: number;
  rows: "M" | "R";
  splits: number;
  /** Row stride of C (resultStride) and its tile rows (to find slice z). */
  stride: number;
  tileRows: number;
  ldo: number;
  off: number;
  scale: number;
  bias: boolean;
  mode: "store" | "add";
}

/**
 * out[m, off + n] (=|+=) scale · f32(Σ_z C[z, m, n]) · sa[m] · sw[n] (+ bias[n]), one thread an output.
 * Bindings: 0 Dims, 1 C, 2 SA (row scales), 3 SW (column scales), 4 Out, 5 Bias (when the spec has one).
 */
export function int8EpilogueWgsl(e: Int8Epilogue): string {
  return `${DIMS_WGSL}
@group(0) @binding(1) var<storage, read> C : array<i32>;
@group(0) @binding(2) var<storage, read> SA : array<f32>;
@group(0) @binding(3) var<storage, read> SW : array<f32>;
@group(0) @binding(4) var<storage, read_write> Out : array<f32>;
${e.bias ? "@group(0) @binding(5) var<storage, read> Bias : array<f32>;" : ""}
@compute @workgroup_size(256)
fn main(@builtin(global_invocation_id) g : vec3<u32>, @builtin(num_workgroups) nw : vec3<u32>) {
  let rows = dims.${e.rows};
  let idx = g.x + g.y * nw.x * 256u;
  if (idx >= rows * ${e.N}u) { return; }
  let m = idx / ${e.N}u;
  let n = idx % ${e.N}u;
  let MP = (rows + ${e.tileRows - 1}u) / ${e.tileRows}u * ${e.tileRows}u;
  var acc = 0;
  for (var z = 0u; z < ${e.splits}u; z = z + 1u) { acc = acc + C[(z * MP + m) * ${e.stride}u + n]; }
  let v = f32(acc) * SA[m] * SW[n] * ${f32(e.scale)}${e.bias ? " + Bias[n]" : ""};
  let i = m * ${e.ldo}u + ${e.off}u + n;
  ${e.mode === "add" ? "Out[i] = Out[i] + v;" : "Out[i] = v;"}
}`;
}

/**
 * The host form of `quantizeRowsWgsl`'s rounding (float32 steps, ties to even, as WGSL's round), for checks
 * and tests: int8 rows of paddedK(K) values and one scale a row.
 */
export function quantizeRowsHost(x: Float32Array, rows: number, K: number): { q: Int8Array; scales: Float32Array } {
  const Kp = paddedK(K);
  const q = new Int8Array(rows * Kp);
  const scales = new Float32Array(rows);
  for (let r = 0; r < rows; r++) {
    let amax = 0;
    for (let k = 0; k < K; k++) amax = Math.max(amax, Math.abs(x[r * K + k]));
    const inv = amax > 0 ? Math.fround(127 / amax) : 0;
    for (let k = 0; k < K; k++) q[r * Kp + k] = Math.max(-128, Math.min(127, roundHalfEven(Math.fround(x[r * K + k] * inv))));
    scales[r] = Math.fround(amax / 127);
  }
  return { q, scales };
}

function roundHalfEven(v: number): number {
  const f = Math.floor(v);
  const d = v - f;
  if (d > 0.5) return f + 1;
  if (d < 0.5) return f;
  return f % 2 === 0 ? f : f + 1;
}
