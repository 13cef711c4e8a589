/**
 * The small per-token kernels of the WebGPU step runner as WGSL: the embedding gather, RMSNorm (optionally
 * gathering the rows to sample), and rotary + KV write. Every kernel binds the shared `Dims` uniform at
 * binding 0 (rows this call) and reads token rows from `Tok` (id, slot, position) so one compiled pipeline
 * serves every batch; model shapes are compiled in as constants.
 */
import { narrowFnWgsl, widenWgsl, type Half } from "../half.js";

/**
 * The per-call sizes every kernel reads: M token rows, R rows to sample, whether sampled ids feed the next
 * step (decode), and the row stride of the rows' sampling settings.
 */
export const DIMS_WGSL = `struct Dims { M : u32, R : u32, decode : u32, pad : u32 }
@group(0) @binding(0) var<uniform> dims : Dims;`;

/** Workgroup id folded over two dimensions (launches past 65535 workgroups). */
export const ROW_OF = "wg.x + wg.y * 65535u";

/** x[m, :] = embed[id(m), :]. Bindings: 1 Tok, 2 Embed, 3 X. */
export function embedWgsl(D: number, e16?: Half): string {
  const read = e16 ? `fn eAt(i : u32) -> f32 { let w = E[i >> 1u]; return ${widenWgsl(e16, "w", "(i & 1u)")}; }` : "fn eAt(i : u32) -> f32 { return E[i]; }";
  return `${DIMS_WGSL}
@group(0) @binding(1) var<storage, read> Tok : array<vec4<u32>>;
@group(0) @binding(2) var<storage, read> E : array<${e16 ? "u32" : "f32"}>;
${read}
@group(0) @binding(3) var<storage, read_write> X : array<f32>;
@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wg : vec3<u32>, @builtin(local_invocation_index) t : u32) {
  let m = ${ROW_OF};
  if (m >= dims.M) { return; }
  let id = Tok[m].x;
  for (var d = t; d < ${D}u; d = d + 64u) { X[m * ${D}u + d] = eAt(id * ${D}u + d); }
}`;
}

/**
 * out[r, :] = x[src(r), :] · rsqrt(mean(x²) + eps) · w, one workgroup per row. With `gather` the rows are
 * the R sampled rows and src(r) = SRow[r] (the last prompt token of a prefill row), else src(r) = r over M.
 * Bindings: 1 X, 2 W, 3 Out, 4 SRow (gather only).
 */
export function rmsNormWgsl(D: number, eps: number, gather: boolean): string {
  return `${DIMS_WGSL}
@group(0) @binding(1) var<storage, read> X : array<f32>;
@group(0) @binding(2) var<storage, read> Wn : array<f32>;
@group(0) @binding(3) var<storage, read_write> Out : array<f32>;
${gather ? "@group(0) @binding(4) var<storage, read> SRow : array<u32>;" : ""}
var<workgroup> red : array<f32, 256>;
@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wg : vec3<u32>, @builtin(local_invocation_index) t : u32) {
  let r = ${ROW_OF};
  if (r >= dims.${gather ? "R" : "M"}) { return; }
  let src = ${gather ? "SRow[r]" : "r"} * ${D}u;
  var s = 0.0;
  for (var d = t; d < ${D}u; d = d + 256u) { let v = X[src + d]; s = s + v * v; }
  red[t] = s;
  workgroupBarrier();
  for (var k = 128u; k > 0u; k = k >> 1u) {
    if (t < k) { red[t] = red[t] + red[t + k]; }
    workgroupBarrier();
  }
  let inv = inverseSqrt(red[0] / ${D}.0 + ${eps.toExponential(8)});
  for (var d = t; d < ${D}u; d = d + 256u) { Out[r * ${D}u + d] = X[src + d] * inv * Wn[d]; }
}`;
}

export interface RopeShape {
  H: number;
  KV: number;
  hd: number;
  /** Positions per slot in the cache. */
  L: number;
  eps: number;
  qkNorm: boolean;
  /** The cache's storage: 16-bit halves packed two per u32 word (lib/model/kv-cache-dtype.ts), or float32 when absent. */
  kv?: Half;
}

/** The WGSL element type of a KV cache buffer: f32, or u32 words of two 16-bit values. */
export function kvElementWgsl(kv: Half | undefined): string {
  return kv ? "u32" : "f32";
}

/**
 * One workgroup per (token row, head of q|k|v in the fused QKV output): q and k heads get the optional
 * per-head RMSNorm (Qwen3) and half-split rotary from the cos/sin table (computed on the CPU exactly as
 * rope.ts does: f32 angle, f64 cos), q goes to Q [M, H, hd], k and v are written in place into the slot's
 * cache [slot, kvHead, position, hd]. A 16-bit cache is written a word (two neighbouring values) per
 * thread, so no two threads share a word. Bindings: 1 QKV, 2 CS (cos [L, hd/2] then sin), 3 Tok, 4 Q,
 * 5 Kc, 6 Vc, 7 qNorm, 8 kNorm (qkNorm only).
 */
export function ropeWgsl(s: RopeShape): string {
  const { H, KV, hd, L, kv } = s;
  const half = hd / 2;
  const width = (H + 2 * KV) * hd;
  if (kv && hd % 2 !== 0) throw new RangeError(`a 16-bit KV cache needs an even head size, got ${hd}`);
  const cacheRow = `((tok.y * ${KV}u + kvh) * ${L}u + tok.z) * ${hd}u`;
  const writeV = kv
    ? `for (var w = t; w < ${half}u; w = w + 64u) { Vc[dst / 2u + w] = narrow2(QKV[src + 2u * w], QKV[src + 2u * w + 1u]); }`
    : `for (var d = t; d < ${hd}u; d = d + 64u) { Vc[dst + d] = QKV[src + d]; }`;
  const writeK = kv
    ? `for (var w = t; w < ${half}u; w = w + 64u) { Kc[dst / 2u + w] = narrow2(rotated(2u * w, tok.z), rotated(2u * w + 1u, tok.z)); }`
    : `for (var d = t; d < ${hd}u; d = d + 64u) { Kc[dst + d] = rotated(d, tok.z); }`;
  return `${DIMS_WGSL}
@group(0) @binding(1) var<storage, read> QKV : array<f32>;
@group(0) @binding(2) var<storage, read> CS : array<f32>;
@group(0) @binding(3) var<storage, read> Tok : array<vec4<u32>>;
@group(0) @binding(4) var<storage, read_write> Q : array<f32>;
@group(0) @binding(5) var<storage, read_write> Kc : array<${kvElementWgsl(kv)}>;
@group(0) @binding(6) var<storage, read_write> Vc : array<${kvElementWgsl(kv)}>;
${s.qkNorm ? "@group(0) @binding(7) var<storage, read> QN : array<f32>;\n@group(0) @binding(8) var<storage, read> KN : array<f32>;" : ""}
var<workgroup> xs : array<f32, ${hd}>;
var<workgroup> red : array<f32, 64>;
${kv ? narrowFnWgsl(kv, "narrow2") : ""}
/** Element d of the (normed) head in xs after rotary at position p. */
fn rotated(d : u32, p : u32) -> f32 {
  let i = d % ${half}u;
  let c = CS[p * ${half}u + i];
  let sn = CS[${L * half}u + p * ${half}u + i];
  var rot = 0.0;
  if (d < ${half}u) { rot = -xs[d + ${half}u]; } else { rot = xs[d - ${half}u]; }
  return xs[d] * c + rot * sn;
}
@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wg : vec3<u32>, @builtin(local_invocation_index) t : u32) {
  let j = wg.x;
  let m = wg.y;
  if (m >= dims.M) { return; }
  let tok = Tok[m];
  let src = m * ${width}u + j * ${hd}u;
  if (j >= ${H + KV}u) {
    let kvh = j - ${H + KV}u;
    let dst = ${cacheRow};
    ${writeV}
    return;
  }
  var ss = 0.0;
  for (var d = t; d < ${hd}u; d = d + 64u) { let v = QKV[src + d]; xs[d] = v; ss = ss + v * v; }
  red[t] = ss;
  workgroupBarrier();
  ${s.qkNorm ? `for (var k = 32u; k > 0u; k = k >> 1u) {
    if (t < k) { red[t] = red[t] + red[t + k]; }
    workgroupBarrier();
  }
  let inv = inverseSqrt(red[0] / ${hd}.0 + ${s.eps.toExponential(8)});
  workgroupBarrier();
  for (var d = t; d < ${hd}u; d = d + 64u) {
    var w = 0.0;
    if (j < ${H}u) { w = QN[d]; } else { w = KN[d]; }
    xs[d] = xs[d] * inv * w;
  }
  workgroupBarrier();` : ""}
  if (j < ${H}u) {
    for (var d = t; d < ${hd}u; d = d + 64u) { Q[(m * ${H}u + j) * ${hd}u + d] = rotated(d, tok.z); }
  } else {
    let kvh = j - ${H}u;
    let dst = ${cacheRow};
    ${writeK}
  }
}`;
}

/** cos then sin of position p and frequency i, [L, hd/2] each, as rope.ts computes them. */
export function ropeTable(L: number, invFreq: Float32Array): Float32Array {
  const half = invFreq.length;
  const out = new Float32Array(2 * L * half);
  for (let p = 0; p < L; p++) {
    for (let i = 0; i < half; i++) {
      const angle = Math.fround(p * invFreq[i]);
      out[p * half + i] = Math.cos(angle);
      out[L * half + p * half + i] = Math.sin(angle);
    }
  }
  return out;
}

/**
 * Copies a prefix of keys and values between slots of one layer's cache ([slot, kvHead, position, hd]):
 * workgroup (x, i, j) copies 256 words of kv head j for copy i, whose (src slot, dst slot, length) are the
 * first three words of entry i of `Copies`. One kernel instead of copyBufferToBuffer, which cannot copy
 * within one buffer. The copy moves 32-bit words, whatever they hold: a float32 cache has one value per
 * word, a 16-bit one (`kv`) two, so a position is hd / 2 words there and the same launch (groups counted
 * for float32) leaves its upper half of threads idle.
 */
export function prefixCopyWgsl(KV: number, L: number, hd: number, kv?: Half): string {
  if (kv && hd % 2 !== 0) throw new RangeError(`a 16-bit KV cache needs an even head size, got ${hd}`);
  const words = kv ? hd / 2 : hd;
  return `
@group(0) @binding(0) var<storage, read> Copies : array<vec4<u32>>;
@group(0) @binding(1) var<storage, read_write> Kc : array<u32>;
@group(0) @binding(2) var<storage, read_write> Vc : array<u32>;
@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wg : vec3<u32>, @builtin(local_invocation_id) lid : vec3<u32>) {
  let c = Copies[wg.y];
  let i = wg.x * 256u + lid.x;
  if (i >= c.z * ${words}u) { return; }
  let src = (c.x * ${KV}u + wg.z) * ${L * words}u + i;
  let dst = (c.y * ${KV}u + wg.z) * ${L * words}u + i;
  Kc[dst] = Kc[src];
  Vc[dst] = Vc[src];
}`;
}
