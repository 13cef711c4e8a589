/**
 * Attention of each token row over its slot's KV cache, as WGSL. A token at position p attends to cache
 * positions 0..p of its own slot, so one kernel serves decode (one row per sequence) and prefill (every
 * prompt token a row, after the rotary kernel has written all of the chunk's keys and values). Grouped
 * query: head h reads kv head floor(h / (H / KV)); nothing is repeated in memory.
 *
 * One workgroup of 256 threads per (row, head), over blocks of 256 cache positions: each thread scores one
 * position (its key read in vec4s), the block's max and the weights exp(s - max) are computed once per
 * position, and the weighted sum of values is split over 256 / hd groups of threads, each a share of the
 * block's positions, summed at the end. The softmax runs online across blocks (a running max and
 * denominator, the partial context rescaled when the max grows), so the cache length is not bounded by
 * workgroup memory. A 16-bit cache (two halves per u32 word) is widened as it is read; scores, softmax and
 * the weighted sum stay f32.
 */
import { DIMS_WGSL, kvElementWgsl } from "./token-kernels.js";
import { widen2Wgsl, widenWgsl, type Half } from "../half.js";

export interface AttentionShape {
  H: number;
  KV: number;
  hd: number;
  L: number;
  /** The cache's storage: 16-bit halves two per u32 word, widened here to f32 (math stays f32); absent: float32. */
  kv?: Half;
}

/**
 * The WGSL reading cache values: `kAt4(i)` the i-th group of 4 key values (vec4), `kAt(e)` / `vAt(e)` one
 * key / value element, over Kc and Vc bound as f32, or as u32 words of two halves (a group of 4 is a
 * vec2<u32>, so both layouts index it alike).
 */
function cacheReads(kv: Half | undefined, vec4Keys: boolean): string {
  if (!kv) {
    return `${vec4Keys ? "fn kAt4(i : u32) -> vec4<f32> { return Kc[i]; }" : "fn kAt(e : u32) -> f32 { return Kc[e]; }"}
fn vAt(e : u32) -> f32 { return Vc[e]; }`;
  }
  const key = vec4Keys
    ? `fn kAt4(i : u32) -> vec4<f32> { let w = Kc[i]; return vec4<f32>(${widen2Wgsl(kv, "w.x")}, ${widen2Wgsl(kv, "w.y")}); }`
    : `fn kAt(e : u32) -> f32 { let w = Kc[e >> 1u]; return ${widenWgsl(kv, "w", "(e & 1u)")}; }`;
  return `${key}
fn vAt(e : u32) -> f32 { let w = Vc[e >> 1u]; return ${widenWgsl(kv, "w", "(e & 1u)")}; }`;
}

/** Both kernels' start: head h, row m (past the call's rows: done), its token entry and its kv head's cache. */
function rowSetup({ H, KV, hd, L }: AttentionShape): string {
  return `let h = wg.x;
  let m = wg.y;
  if (m >= dims.M) { return; }
  let tok = Tok[m];
  let base = ((tok.y * ${KV}u + h / ${H / KV}u) * ${L}u) * ${hd}u;`;
}

/** Threads per workgroup, and cache positions per block. */
const T = 256;
/** Value rows a thread loads before it multiplies them in. */
const UNROLL = 4;

/** Bindings: 1 Q [M, H, hd], 2 Kc, 3 Vc ([slot, KV, L, hd]), 4 Tok, 5 Ctx [M, H, hd]. */
export function attentionWgsl(s: AttentionShape): string {
  const { H, hd, kv } = s;
  if (kv && hd % 2 !== 0) throw new RangeError(`a 16-bit KV cache needs an even head size, got ${hd}`);
  if (hd % 4 !== 0 || T % hd !== 0) return attentionScalarWgsl(s);
  const H4 = hd / 4;
  // groups of hd threads, each summing values over every G-th position of a block
  const G = T / hd;
  const loads = Array.from({ length: UNROLL }, (_, u) => `let j${u} = jj + ${u * G}u; var v${u} = 0.0; var w${u} = 0.0; if (j${u} < cnt) { w${u} = sc[j${u}]; v${u} = vAt(base + (b0 + j${u}) * ${hd}u + d); }`).join("\n      ");
  const fmas = Array.from({ length: UNROLL }, (_, u) => `acc = acc + w${u} * v${u}; wsum = wsum + w${u};`).join(" ");
  return `${DIMS_WGSL}
@group(0) @binding(1) var<storage, read> Q : array<vec4<f32>>;
@group(0) @binding(2) var<storage, read> Kc : array<${kv ? "vec2<u32>" : "vec4<f32>"}>;
@group(0) @binding(3) var<storage, read> Vc : array<${kvElementWgsl(kv)}>;
@group(0) @binding(4) var<storage, read> Tok : array<vec4<u32>>;
@group(0) @binding(5) var<storage, read_write> Ctx : array<f32>;
${cacheReads(kv, true)}
var<workgroup> qs : array<vec4<f32>, ${H4}>;
var<workgroup> sc : array<f32, ${T}>;
var<workgroup> red : array<f32, ${T}>;
var<workgroup> part : array<f32, ${T}>;
var<workgroup> lenShared : u32;
@compute @workgroup_size(${T})
fn main(@builtin(workgroup_id) wg : vec3<u32>, @builtin(local_invocation_index) t : u32) {
  ${rowSetup(s)}
  if (t < ${H4}u) { qs[t] = Q[(m * ${H}u + h) * ${H4}u + t]; }
  if (t == 0u) { lenShared = tok.z + 1u; }
  // the loop bound must be uniform across the workgroup for the barriers inside it
  let len = workgroupUniformLoad(&lenShared);
  let d = t % ${hd}u;
  let g = t / ${hd}u;
  var mrun = -3.0e38;
  var acc = 0.0;
  var wsum = 0.0;
  for (var b0 = 0u; b0 < len; b0 = b0 + ${T}u) {
    let p = b0 + t;
    var s = -3.0e38;
    if (p < len) {
      let kb = (base + p * ${hd}u) / 4u;
      var dot = 0.0;
      for (var i = 0u; i < ${H4}u; i = i + 1u) { dot = dot + dot4(qs[i], kAt4(kb + i)); }
      s = dot * ${(1 / Math.sqrt(hd)).toPrecision(9)};
    }
    red[t] = s;
    workgroupBarrier();
    for (var k = ${T / 2}u; k > 0u; k = k >> 1u) {
      if (t < k) { red[t] = max(red[t], red[t + k]); }
      workgroupBarrier();
    }
    let mnew = max(mrun, red[0]);
    // a position past the end scores -3e38: its weight is exp(-huge) = 0
    sc[t] = exp(s - mnew);
    let corr = exp(mrun - mnew);
    acc = acc * corr;
    wsum = wsum * corr;
    mrun = mnew;
    workgroupBarrier();
    let cnt = min(${T}u, len - b0);
    for (var jj = g; jj < cnt; jj = jj + ${UNROLL * G}u) {
      ${loads}
      ${fmas}
    }
    workgroupBarrier();
  }
  // the groups' partial sums (every group saw the same max) into one
  part[t] = acc;
  red[t] = wsum;
  workgroupBarrier();
  if (g == 0u) {
    var a = 0.0;
    var l = 0.0;
    for (var i = 0u; i < ${G}u; i = i + 1u) { a = a + part[i * ${hd}u + d]; l = l + red[i * ${hd}u + d]; }
    Ctx[(m * ${H}u + h) * ${hd}u + d] = a / l;
  }
}
fn dot4(a : vec4<f32>, b : vec4<f32>) -> f32 { return dot(a, b); }`;
}

/** The kernel for head sizes the vector one does not take (not a multiple of 4, or not dividing 256). */
function attentionScalarWgsl(s: AttentionShape): string {
  const { H, hd, kv } = s;
  const per = Math.ceil(hd / 64);
  return `${DIMS_WGSL}
@group(0) @binding(1) var<storage, read> Q : array<f32>;
@group(0) @binding(2) var<storage, read> Kc : array<${kvElementWgsl(kv)}>;
@group(0) @binding(3) var<storage, read> Vc : array<${kvElementWgsl(kv)}>;
@group(0) @binding(4) var<storage, read> Tok : array<vec4<u32>>;
@group(0) @binding(5) var<storage, read_write> Ctx : array<f32>;
${cacheReads(kv, false)}
var<workgroup> qs : array<f32, ${hd}>;
var<workgroup> sc : array<f32, 64>;
var<workgroup> red : array<f32, 64>;
var<workgroup> lenShared : u32;
@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wg : vec3<u32>, @builtin(local_invocation_index) t : u32) {
  ${rowSetup(s)}
  for (var d = t; d < ${hd}u; d = d + 64u) { qs[d] = Q[(m * ${H}u + h) * ${hd}u + d]; }
  if (t == 0u) { lenShared = tok.z + 1u; }
  // the loop bound must be uniform across the workgroup for the barriers inside it
  let len = workgroupUniformLoad(&lenShared);
  var mrun = -3.0e38;
  var lrun = 0.0;
  var acc : array<f32, ${per}>;
  for (var b0 = 0u; b0 < len; b0 = b0 + 64u) {
    let p = b0 + t;
    var s = -3.0e38;
    if (p < len) {
      var dot = 0.0;
      let kb = base + p * ${hd}u;
      for (var d = 0u; d < ${hd}u; d = d + 1u) { dot = dot + qs[d] * kAt(kb + d); }
      s = dot * ${(1 / Math.sqrt(hd)).toPrecision(9)};
    }
    sc[t] = s;
    red[t] = s;
    workgroupBarrier();
    for (var k = 32u; k > 0u; k = k >> 1u) {
      if (t < k) { red[t] = max(red[t], red[t + k]); }
      workgroupBarrier();
    }
    let mnew = max(mrun, red[0]);
    let corr = exp(mrun - mnew);
    lrun = lrun * corr;
    for (var i = 0u; i < ${per}u; i = i + 1u) { acc[i] = acc[i] * corr; }
    let cnt = min(64u, len - b0);
    for (var jj = 0u; jj < cnt; jj = jj + 1u) {
      let w = exp(sc[jj] - mnew);
      lrun = lrun + w;
      let vb = base + (b0 + jj) * ${hd}u;
      for (var i = 0u; i < ${per}u; i = i + 1u) {
        let d = t + 64u * i;
        if (d < ${hd}u) { acc[i] = acc[i] + w * vAt(vb + d); }
      }
    }
    mrun = mnew;
    workgroupBarrier();
  }
  for (var i = 0u; i < ${per}u; i = i + 1u) {
    let d = t + 64u * i;
    if (d < ${hd}u) { Ctx[(m * ${H}u + h) * ${hd}u + d] = acc[i] / lrun; }
  }
}`;
}
