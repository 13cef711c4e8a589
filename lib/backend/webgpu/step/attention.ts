/**
 * Attention of each token row over its slot's KV cache, as WGSL. A token at position p attends to cache
 * positions 0..p of its own slot, so one kernel serves decode (one row per sequence) and prefill (every
 * prompt token a row, after the rotary kernel has written all of the chunk's keys and values). Grouped
 * query: head h reads kv head floor(h / (H / KV)); nothing is repeated in memory.
 *
 * One workgroup per (row, head): keys are scored 64 positions at a time, and the softmax runs online (a
 * running max and denominator, the partial context rescaled when the max grows), so the cache length is not
 * bounded by workgroup memory.
 */
import { DIMS_WGSL } from "./token-kernels.js";

export interface AttentionShape {
  H: number;
  KV: number;
  hd: number;
  L: number;
}

/** Bindings: 1 Q [M, H, hd], 2 Kc, 3 Vc ([slot, KV, L, hd]), 4 Tok, 5 Ctx [M, H, hd]. */
export function attentionWgsl(s: AttentionShape): string {
  const { H, KV, hd, L } = s;
  const per = Math.ceil(hd / 64);
  return `${DIMS_WGSL}
@group(0) @binding(1) var<storage, read> Q : array<f32>;
@group(0) @binding(2) var<storage, read> Kc : array<f32>;
@group(0) @binding(3) var<storage, read> Vc : array<f32>;
@group(0) @binding(4) var<storage, read> Tok : array<vec4<u32>>;
@group(0) @binding(5) var<storage, read_write> Ctx : array<f32>;
var<workgroup> qs : array<f32, ${hd}>;
var<workgroup> sc : array<f32, 64>;
var<workgroup> red : array<f32, 64>;
var<workgroup> lenShared : u32;
@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wg : vec3<u32>, @builtin(local_invocation_index) t : u32) {
  let h = wg.x;
  let m = wg.y;
  if (m >= dims.M) { return; }
  let tok = Tok[m];
  let base = ((tok.y * ${KV}u + h / ${H / KV}u) * ${L}u) * ${hd}u;
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
      for (var d = 0u; d < ${hd}u; d = d + 1u) { dot = dot + qs[d] * Kc[kb + d]; }
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
        if (d < ${hd}u) { acc[i] = acc[i] + w * Vc[vb + d]; }
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
