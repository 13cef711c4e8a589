/**
 * Sampling on the device, one workgroup per row of logits, as lib/model/sampler.ts defines it: the row's
 * sparse bias is added, then greedy (temperature 0) takes the argmax (lowest index among ties); otherwise
 * p = softmax((logits + bias) / T), the top-k and top-p cuts become one probability threshold τ found by
 * bisection (the largest τ keeping at least k tokens, then the largest keeping mass ≥ top-p: the same set the
 * CPU's sort keeps, up to exact ties at the cut), and the token is the inverse CDF of the kept mass at the
 * row's u, in index order. That is a different token than the CPU's sorted order picks for the same u, but a
 * sample of the same distribution. The log-probability is taken before the cuts; the top-n most likely tokens
 * are found by n passes of an argmax over the tokens after the previous pick in (logit desc, index asc)
 * order. Flags (settings word 7): ALLOW_LIST, the row's bias entries are the only tokens allowed (guided
 * decoding's mask, sent as whichever of the allowed or banned list is shorter; the others are banned);
 * RAW_LOGPROBS, the reported log-probabilities are the model's log_softmax(logits) before bias, mask and
 * temperature (each reported token's raw logit is its biased one less its bias entry; the top-n tokens are
 * still ranked by the processed logits). Only ids and log-probabilities are written out. In decode mode the sampled id and the next position
 * are written into the row's token entry, so the next step runs on the device without a read-back.
 */
import { DIMS_WGSL } from "./token-kernels.js";

/** Most top-n log-probabilities a row can ask for (OpenAI's limit). */
export const MAX_TOP = 20;
/** u32 words of one row's result: id, logprob, then MAX_TOP (id, logprob) pairs. */
export const OUT_WORDS = 2 + 2 * MAX_TOP;
/** u32 words of one row's settings: temperature, topP, topK, u, topN, bias offset, bias count, flags. */
export const PARAM_WORDS = 8;
/** Settings flag: the bias entries list the allowed tokens (each with its bias); every other token is banned. */
export const FLAG_ALLOW_LIST = 1;
/** Settings flag: report raw log-probabilities. */
export const FLAG_RAW_LOGPROBS = 2;
/** Bisection steps per cut: the threshold's interval shrinks to 2^-40 of the largest probability. */
const BISECT = 40;

/**
 * Bindings: 1 Logits [R, V] (the bias is added in place), 2 Params, 3 Bias (id, f32 bits), 4 Out, 5 Tok,
 * 6 State (the step index), 7 P [R, V] scratch for probabilities.
 */
export function samplerWgsl(V: number): string {
  const chunk = Math.ceil(V / 256);
  return `${DIMS_WGSL}
@group(0) @binding(1) var<storage, read_write> Lg : array<f32>;
@group(0) @binding(2) var<storage, read> Params : array<u32>;
@group(0) @binding(3) var<storage, read> Bias : array<vec2<u32>>;
@group(0) @binding(4) var<storage, read_write> Out : array<u32>;
@group(0) @binding(5) var<storage, read_write> Tok : array<vec4<u32>>;
@group(0) @binding(6) var<storage, read> State : array<u32>;
@group(0) @binding(7) var<storage, read_write> P : array<f32>;
const V = ${V}u;
const CH = ${chunk}u;
var<workgroup> rv : array<f32, 256>;
var<workgroup> ri : array<u32, 256>;
var<workgroup> uni : array<u32, 8>;
var<workgroup> uf : f32;
var<workgroup> picked : u32;
var<workgroup> rawBias : f32;

// the bias entry of token i for this row (0 when none): how far its logit was moved before sampling
fn biasOf(t : u32, boff : u32, bcount : u32, i : u32) -> f32 {
  if (t == 0u) { rawBias = 0.0; }
  workgroupBarrier();
  for (var k = t; k < bcount; k = k + 256u) {
    let e = Bias[boff + k];
    if (e.x == i) { rawBias = bitcast<f32>(e.y); }
  }
  workgroupBarrier();
  let b = rawBias;
  workgroupBarrier();
  return b;
}

fn sum256(t : u32, v : f32) -> f32 {
  rv[t] = v;
  workgroupBarrier();
  for (var k = 128u; k > 0u; k = k >> 1u) {
    if (t < k) { rv[t] = rv[t] + rv[t + k]; }
    workgroupBarrier();
  }
  let out = rv[0];
  workgroupBarrier();
  return out;
}

// the larger (value, lowest index) pair of each thread's candidate, across the workgroup
fn best256(t : u32, v : f32, i : u32) -> vec2<u32> {
  rv[t] = v;
  ri[t] = i;
  workgroupBarrier();
  for (var k = 128u; k > 0u; k = k >> 1u) {
    if (t < k) {
      let ov = rv[t + k];
      let oi = ri[t + k];
      if (ov > rv[t] || (ov == rv[t] && oi < ri[t])) { rv[t] = ov; ri[t] = oi; }
    }
    workgroupBarrier();
  }
  let out = vec2<u32>(bitcast<u32>(rv[0]), ri[0]);
  workgroupBarrier();
  return out;
}

fn countAbove(t : u32, base : u32, tau : f32) -> f32 {
  var c = 0.0;
  for (var i = t; i < V; i = i + 256u) { if (P[base + i] >= tau && P[base + i] > 0.0) { c = c + 1.0; } }
  return sum256(t, c);
}

fn massAbove(t : u32, base : u32, tau : f32) -> f32 {
  var c = 0.0;
  for (var i = t; i < V; i = i + 256u) { let p = P[base + i]; if (p >= tau && p > 0.0) { c = c + p; } }
  return sum256(t, c);
}

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wg : vec3<u32>, @builtin(local_invocation_index) t : u32) {
  let r = wg.x;
  if (r >= dims.R) { return; }
  if (t < 8u) { uni[t] = Params[(State[0] * dims.R + r) * ${PARAM_WORDS}u + t]; }
  let temp = bitcast<f32>(workgroupUniformLoad(&uni[0]));
  let topP = bitcast<f32>(workgroupUniformLoad(&uni[1]));
  let topK = workgroupUniformLoad(&uni[2]);
  let u = bitcast<f32>(workgroupUniformLoad(&uni[3]));
  let topN = min(workgroupUniformLoad(&uni[4]), ${MAX_TOP}u);
  let boff = workgroupUniformLoad(&uni[5]);
  let bcount = workgroupUniformLoad(&uni[6]);
  let flags = workgroupUniformLoad(&uni[7]);
  let raw = (flags & ${2}u) != 0u;
  let base = r * V;
  // the raw distribution's max and normaliser, before any bias or mask
  var rmx = 0.0;
  var rlogZ = 0.0;
  if (raw) {
    var rb = -3.4e38;
    for (var i = t; i < V; i = i + 256u) { rb = max(rb, Lg[base + i]); }
    rv[t] = rb;
    workgroupBarrier();
    for (var k = 128u; k > 0u; k = k >> 1u) {
      if (t < k) { rv[t] = max(rv[t], rv[t + k]); }
      workgroupBarrier();
    }
    rmx = rv[0];
    workgroupBarrier();
    var rz = 0.0;
    for (var i = t; i < V; i = i + 256u) { rz = rz + exp(Lg[base + i] - rmx); }
    rlogZ = log(sum256(t, rz));
  }
  if ((flags & ${1}u) != 0u) {
    // allow list: keep the listed tokens (plus their bias) in P, ban the row, put them back
    for (var i = t; i < bcount; i = i + 256u) {
      let e = Bias[boff + i];
      P[base + e.x] = max(Lg[base + e.x] + bitcast<f32>(e.y), -3.0e38);
    }
    storageBarrier();
    workgroupBarrier();
    for (var i = t; i < V; i = i + 256u) { Lg[base + i] = -3.0e38; }
    storageBarrier();
    workgroupBarrier();
    for (var i = t; i < bcount; i = i + 256u) {
      let e = Bias[boff + i];
      Lg[base + e.x] = P[base + e.x];
    }
  } else {
    for (var i = t; i < bcount; i = i + 256u) {
      let e = Bias[boff + i];
      Lg[base + e.x] = max(Lg[base + e.x] + bitcast<f32>(e.y), -3.0e38);
    }
  }
  storageBarrier();
  workgroupBarrier();
  var bv = -3.4e38;
  var bi = 0xffffffffu;
  for (var i = t; i < V; i = i + 256u) { let v = Lg[base + i]; if (v > bv) { bv = v; bi = i; } }
  let top = best256(t, bv, bi);
  let mx = bitcast<f32>(top.x);
  var T = 1.0;
  if (temp > 0.0) { T = temp; }
  var z = 0.0;
  for (var i = t; i < V; i = i + 256u) { z = z + exp((Lg[base + i] - mx) / T); }
  z = sum256(t, z);
  let logZ = log(z);
  var id = top.y;
  if (temp > 0.0) {
    for (var i = t; i < V; i = i + 256u) { P[base + i] = exp((Lg[base + i] - mx) / T) / z; }
    storageBarrier();
    workgroupBarrier();
    let pmax = 1.0 / z;
    var tau = 0.0;
    if (topK > 0u && topK < V) {
      var lo = 0.0;
      var hi = pmax;
      if (countAbove(t, base, hi) >= f32(topK)) { lo = hi; }
      for (var it = 0u; it < ${BISECT}u; it = it + 1u) {
        let mid = 0.5 * (lo + hi);
        if (countAbove(t, base, mid) >= f32(topK)) { lo = mid; } else { hi = mid; }
      }
      tau = lo;
    }
    if (topP < 1.0) {
      var lo = tau;
      var hi = pmax;
      if (massAbove(t, base, hi) >= topP) { lo = hi; }
      for (var it = 0u; it < ${BISECT}u; it = it + 1u) {
        let mid = 0.5 * (lo + hi);
        if (massAbove(t, base, mid) >= topP) { lo = mid; } else { hi = mid; }
      }
      tau = lo;
    }
    // each thread's contiguous chunk of kept mass, then one thread walks to the chunk holding u · mass
    let start = t * CH;
    let stop = min(V, start + CH);
    var cm = 0.0;
    var last = 0xffffffffu;
    for (var i = start; i < stop; i = i + 1u) { let p = P[base + i]; if (p >= tau && p > 0.0) { cm = cm + p; last = i; } }
    rv[t] = cm;
    ri[t] = last;
    workgroupBarrier();
    if (t == 0u) {
      var total = 0.0;
      for (var c = 0u; c < 256u; c = c + 1u) { total = total + rv[c]; }
      let goal = u * total;
      var acc = 0.0;
      var chosen = 0xffffffffu;
      var fallback = top.y;
      for (var c = 0u; c < 256u; c = c + 1u) {
        if (ri[c] != 0xffffffffu) { fallback = ri[c]; }
        if (chosen == 0xffffffffu && rv[c] > 0.0 && goal < acc + rv[c]) {
          let s0 = c * CH;
          let s1 = min(V, s0 + CH);
          var a = acc;
          for (var i = s0; i < s1; i = i + 1u) {
            let p = P[base + i];
            if (p >= tau && p > 0.0) { a = a + p; if (goal < a) { chosen = i; break; } }
          }
        }
        acc = acc + rv[c];
      }
      if (chosen == 0xffffffffu) { chosen = fallback; }
      picked = chosen;
    }
    id = workgroupUniformLoad(&picked);
  }
  let o = (State[0] * dims.R + r) * ${OUT_WORDS}u;
  var idBias = 0.0;
  if (raw) { idBias = biasOf(t, boff, bcount, id); }
  if (t == 0u) {
    Out[o] = id;
    if (raw) {
      Out[o + 1u] = bitcast<u32>(Lg[base + id] - idBias - rmx - rlogZ);
    } else {
      Out[o + 1u] = bitcast<u32>((Lg[base + id] - mx) / T - logZ);
    }
    if (dims.decode == 1u) {
      Tok[r].x = id;
      Tok[r].z = Tok[r].z + 1u;
    }
  }
  var pv = 3.4e38;
  var pi = 0u;
  for (var j = 0u; j < topN; j = j + 1u) {
    var cv = -3.4e38;
    var ci = 0xffffffffu;
    for (var i = t; i < V; i = i + 256u) {
      let v = Lg[base + i];
      let after = v < pv || (v == pv && i > pi) || j == 0u;
      if (after && (v > cv)) { cv = v; ci = i; }
    }
    let b = best256(t, cv, ci);
    pv = bitcast<f32>(b.x);
    pi = b.y;
    var pb = 0.0;
    if (raw) { pb = biasOf(t, boff, bcount, pi); }
    if (t == 0u) {
      Out[o + 2u + 2u * j] = pi;
      if (raw) {
        Out[o + 3u + 2u * j] = bitcast<u32>(pv - pb - rmx - rlogZ);
      } else {
        Out[o + 3u + 2u * j] = bitcast<u32>((pv - mx) / T - logZ);
      }
    }
  }
}`;
}

/** Steps the device-side step counter between decode steps. Bindings: 1 State. */
export const ADVANCE_WGSL = `${DIMS_WGSL}
@group(0) @binding(1) var<storage, read_write> State : array<u32>;
@compute @workgroup_size(1)
fn main() {
  if (dims.M > 0u) { State[0] = State[0] + 1u; }
}`;
