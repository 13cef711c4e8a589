/**
 * Fused causal grouped-query attention for training on WebGPU, forward and backward, as tfjs kernels.
 *
 * The ops path (lib/model/decoder.ts) multiplies queries by keys, adds a [B, 1, T, S] bias built on the
 * CPU, takes a softmax and multiplies by the values: every [B, H, T, S] score and probability tensor goes
 * through global memory, and the backward keeps them. Here attention is computed flash-style: each
 * workgroup holds a tile of keys and values in workgroup memory and runs an online softmax over them for
 * 64 query rows at once, so nothing of size T x S is ever stored. The forward saves only the context and
 * the row log-sum-exp; the backward recomputes the probabilities from q, k and it.
 *
 * Masking: key s is visible to query t of row b iff keyValid[b][s] and s <= past + t (`past` keys, e.g. a
 * broadcast prompt prefix, sit before the rows' own tokens). A query row that sees no key gets context 0.
 * Query head h reads kv head floor(h / G), G = H / KV; keys and values are never repeated in memory.
 *
 * Dispatches per call: forward 2 (attention into one packed buffer [context | lse], then the context copied
 * out: a tfjs program writes one buffer), backward 5 (D = rowsum(dO * O) with lse; dq; dk and dv per query
 * head into one packed buffer; the sum over the G heads of a kv head, once for dk and once for dv).
 */
import { tf } from "../tf.js";
import { elementwise, type Program, type Uniform, type WebGpuBackendLike } from "./program.js";

/** A program whose inputs may be read as vectors (tfjs-backend-webgpu's `variableComponents`). */
type VectorProgram = Program & { variableComponents: number[] };

export const ATTENTION = "T2sAttention";
export const ATTENTION_GRAD = "T2sAttentionGrad";

/** Query rows per forward / dq workgroup (one thread each). */
const QUERY_TILE = 64;
/** Key rows per dk/dv workgroup (one thread each). */
const KEY_TILE = 64;

/** Keys held in workgroup memory per step of the forward and dq loops: K and V tiles stay within 16 KB. */
function keyStep(hd: number): number {
  return Math.max(8, Math.min(32, 2048 / hd));
}

/** Query rows held in workgroup memory per step of the dk/dv loop (Q and dO tiles within 16 KB). */
function queryStep(hd: number): number {
  return Math.max(8, Math.min(32, 2048 / hd));
}

export interface AttentionDims {
  B: number;
  H: number;
  KV: number;
  T: number;
  S: number;
  hd: number;
}

const SHAPE_UNIFORMS = "B : i32, H : i32, KV : i32, T : i32, S : i32, past : i32, scale : f32,";

function shapeUniforms(d: AttentionDims, past: number, scale: number): Uniform[] {
  const i = (x: number): Uniform => ({ type: "int32", data: [x] });
  return [i(d.B), i(d.H), i(d.KV), i(d.T), i(d.S), i(past), { type: "float32", data: [scale] }];
}

/** WGSL shared by the kernels: indices into q/k/v (as vec4 rows) and the visibility rule. */
function preamble(hd: number): string {
  return `
      const HD4 = ${hd / 4};
      const HD = ${hd};
      fn rowsOfHead(b : i32, h : i32) -> i32 { return (b * uniforms.H + h) * uniforms.T; }
      fn rowsOfKv(b : i32, kv : i32) -> i32 { return (b * uniforms.KV + kv) * uniforms.S; }
      // query rows of all heads (B·H·T): where the second part of a packed buffer starts, in rows
      fn allRows() -> i32 { return uniforms.B * uniforms.H * uniforms.T; }
      // loop bounds computed from workgroupId (a private variable) are not uniform to the compiler; one
      // thread's copy read back with workgroupUniformLoad is
      var<workgroup> boundShared : i32;
      fn uniformBound(x : i32) -> i32 {
        if (localId.x == 0u) { boundShared = x; }
        return workgroupUniformLoad(&boundShared);
      }`;
}

/**
 * Forward: one workgroup per (query tile, head, batch row), one thread per query row. Writes the packed
 * buffer [context [B, H, T, hd] | lse [B, H, T]].
 */
function forwardProgram(d: AttentionDims, maskType: string): VectorProgram {
  const { B, H, T, hd } = d;
  const N = B * H * T;
  const BK = keyStep(hd);
  return {
    variableNames: ["Q", "K", "V", "Mask"],
    variableComponents: [4, 4, 4, 1],
    outputShape: [N * hd + N],
    shaderKey: `t2s_attention_fwd_${hd}_${BK}_${maskType}`,
    dispatchLayout: { x: [0] },
    dispatch: [Math.ceil(T / QUERY_TILE), H, B],
    workgroupSize: [QUERY_TILE, 1, 1],
    uniforms: SHAPE_UNIFORMS,
    getUserCode: () => `${preamble(hd)}
      const BK = ${BK};
      const SC = ${BK + 1};
      var<workgroup> kt : array<vec4<f32>, ${BK * (hd / 4)}>;
      var<workgroup> vt : array<vec4<f32>, ${BK * (hd / 4)}>;
      var<workgroup> seen : array<f32, ${BK}>;
      // each thread's scores of the current key tile (padded rows: no bank conflicts)
      var<workgroup> sc : array<f32, ${QUERY_TILE * (BK + 1)}>;
      fn main(index : i32) {
        let lane = i32(localId.x);
        let t0 = i32(workgroupId.x) * ${QUERY_TILE};
        let h = i32(workgroupId.y);
        let b = i32(workgroupId.z);
        let t = t0 + lane;
        let live = t < uniforms.T;
        let kvBase = rowsOfKv(b, h / (uniforms.H / uniforms.KV));
        let myPos = uniforms.past + t;
        var q : array<vec4<f32>, HD4>;
        var acc : array<vec4<f32>, HD4>;
        let qRow = (rowsOfHead(b, h) + t) * HD4;
        for (var c = 0; c < HD4; c++) {
          if (live) { q[c] = Q[qRow + c] * uniforms.scale; } else { q[c] = vec4<f32>(0.0); }
          acc[c] = vec4<f32>(0.0);
        }
        var m = -3.0e38;
        var l = 0.0;
        // keys past the last query's position are masked for the whole tile (the bound is uniform)
        let kEnd = uniformBound(min(uniforms.S, uniforms.past + min(t0 + ${QUERY_TILE}, uniforms.T)));
        for (var k0 = 0; k0 < kEnd; k0 += BK) {
          workgroupBarrier();
          for (var i = lane; i < BK * HD4; i += ${QUERY_TILE}) {
            let s = k0 + i / HD4;
            if (s < uniforms.S) {
              let at = (kvBase + s) * HD4 + i % HD4;
              kt[i] = K[at];
              vt[i] = V[at];
            }
          }
          for (var j = lane; j < BK; j += ${QUERY_TILE}) {
            var ok = 0.0;
            if (k0 + j < uniforms.S && f32(Mask[b * uniforms.S + k0 + j]) > 0.5) { ok = 1.0; }
            seen[j] = ok;
          }
          workgroupBarrier();
          var tileMax = -3.0e38;
          for (var j = 0; j < BK; j++) {
            var s = -3.0e38;
            if (seen[j] > 0.5 && k0 + j <= myPos) {
              var dotv = 0.0;
              for (var c = 0; c < HD4; c++) { dotv += dot(q[c], kt[j * HD4 + c]); }
              s = dotv;
              tileMax = max(tileMax, s);
            }
            sc[lane * SC + j] = s;
          }
          if (tileMax > -1.0e38) {
            let mNew = max(m, tileMax);
            let corr = exp(m - mNew);
            l = l * corr;
            for (var c = 0; c < HD4; c++) { acc[c] = acc[c] * corr; }
            for (var j = 0; j < BK; j++) {
              let s = sc[lane * SC + j];
              if (s > -1.0e38) {
                let p = exp(s - mNew);
                l += p;
                for (var c = 0; c < HD4; c++) { acc[c] += p * vt[j * HD4 + c]; }
              }
            }
            m = mNew;
          }
        }
        if (live) {
          let row = rowsOfHead(b, h) + t;
          var inv = 0.0;
          var lse = 0.0;
          if (l > 0.0) {
            inv = 1.0 / l;
            lse = m + log(l);
          }
          for (var c = 0; c < HD4; c++) {
            let o = acc[c] * inv;
            for (var e = 0; e < 4; e++) { result[row * HD + c * 4 + e] = o[e]; }
          }
          result[allRows() * HD + row] = lse;
        }
      }`,
  };
}

/** Backward step 1: [lse [N] | D [N]] with D = rowsum(dO * O), read from the packed forward buffer. */
function rowStatsProgram(d: AttentionDims): Program {
  const N = d.B * d.H * d.T;
  const hd = d.hd;
  return elementwise([2 * N], `t2s_attention_rowstats_${hd}`, ["W", "DO"], "n : i32,", `
          let n = uniforms.n;
          if (index < n) {
            result[index] = W[n * ${hd} + index];
          } else {
            let row = index - n;
            var acc = 0.0;
            for (var e = 0; e < ${hd}; e++) { acc += DO[row * ${hd} + e] * W[row * ${hd} + e]; }
            result[index] = acc;
          }`);
}

/** Backward step 2: dq, one workgroup per (query tile, head, batch row), one thread per query row. */
function dqProgram(d: AttentionDims, maskType: string): VectorProgram {
  const { B, H, T, hd } = d;
  const N = B * H * T;
  const BK = keyStep(hd);
  return {
    variableNames: ["Q", "K", "V", "Mask", "DO", "LD"],
    variableComponents: [4, 4, 4, 1, 4, 1],
    outputShape: [B, H, T, hd],
    shaderKey: `t2s_attention_dq_${hd}_${BK}_${maskType}`,
    dispatchLayout: { x: [0] },
    dispatch: [Math.ceil(T / QUERY_TILE), H, B],
    workgroupSize: [QUERY_TILE, 1, 1],
    uniforms: SHAPE_UNIFORMS,
    getUserCode: () => `${preamble(hd)}
      const BK = ${BK};
      var<workgroup> kt : array<vec4<f32>, ${BK * (hd / 4)}>;
      var<workgroup> vt : array<vec4<f32>, ${BK * (hd / 4)}>;
      var<workgroup> seen : array<f32, ${BK}>;
      fn main(index : i32) {
        let lane = i32(localId.x);
        let t0 = i32(workgroupId.x) * ${QUERY_TILE};
        let h = i32(workgroupId.y);
        let b = i32(workgroupId.z);
        let t = t0 + lane;
        let live = t < uniforms.T;
        let kvBase = rowsOfKv(b, h / (uniforms.H / uniforms.KV));
        let myPos = uniforms.past + t;
        let row = rowsOfHead(b, h) + t;
        var q : array<vec4<f32>, HD4>;
        var dout : array<vec4<f32>, HD4>;
        var dq : array<vec4<f32>, HD4>;
        var lse = 0.0;
        var dsum = 0.0;
        if (live) {
          lse = LD[row];
          dsum = LD[allRows() + row];
        }
        for (var c = 0; c < HD4; c++) {
          if (live) {
            q[c] = Q[row * HD4 + c] * uniforms.scale;
            dout[c] = DO[row * HD4 + c];
          } else {
            q[c] = vec4<f32>(0.0);
            dout[c] = vec4<f32>(0.0);
          }
          dq[c] = vec4<f32>(0.0);
        }
        let kEnd = uniformBound(min(uniforms.S, uniforms.past + min(t0 + ${QUERY_TILE}, uniforms.T)));
        for (var k0 = 0; k0 < kEnd; k0 += BK) {
          workgroupBarrier();
          for (var i = lane; i < BK * HD4; i += ${QUERY_TILE}) {
            let s = k0 + i / HD4;
            if (s < uniforms.S) {
              let at = (kvBase + s) * HD4 + i % HD4;
              kt[i] = K[at];
              vt[i] = V[at];
            }
          }
          for (var j = lane; j < BK; j += ${QUERY_TILE}) {
            var ok = 0.0;
            if (k0 + j < uniforms.S && f32(Mask[b * uniforms.S + k0 + j]) > 0.5) { ok = 1.0; }
            seen[j] = ok;
          }
          workgroupBarrier();
          if (live) {
            for (var j = 0; j < BK; j++) {
              if (seen[j] > 0.5 && k0 + j <= myPos) {
                var s = 0.0;
                var dp = 0.0;
                for (var c = 0; c < HD4; c++) {
                  s += dot(q[c], kt[j * HD4 + c]);
                  dp += dot(dout[c], vt[j * HD4 + c]);
                }
                let ds = exp(s - lse) * (dp - dsum);
                for (var c = 0; c < HD4; c++) { dq[c] += ds * kt[j * HD4 + c]; }
              }
            }
          }
        }
        if (live) {
          for (var c = 0; c < HD4; c++) {
            let g = dq[c] * uniforms.scale;
            for (var e = 0; e < 4; e++) { result[row * HD + c * 4 + e] = g[e]; }
          }
        }
      }`,
  };
}

/**
 * Backward step 3: dk and dv of every query head, packed [dk [B, H, S, hd] | dv [B, H, S, hd]]; one
 * workgroup per (key tile, head, batch row), one thread per key row, looping over the queries that see
 * the tile. Per query head rather than per kv head, so B·H·S/64 workgroups fill the GPU even with KV = 2.
 */
function dkvProgram(d: AttentionDims, maskType: string): VectorProgram {
  const { B, H, T, S, hd } = d;
  const N = B * H * T;
  const BQ = queryStep(hd);
  return {
    variableNames: ["Q", "K", "V", "Mask", "DO", "LD"],
    variableComponents: [4, 4, 4, 1, 4, 1],
    outputShape: [2 * B * H * S * hd],
    shaderKey: `t2s_attention_dkv_${hd}_${BQ}_${maskType}`,
    dispatchLayout: { x: [0] },
    dispatch: [Math.ceil(S / KEY_TILE), H, B],
    workgroupSize: [KEY_TILE, 1, 1],
    uniforms: SHAPE_UNIFORMS,
    getUserCode: () => `${preamble(hd)}
      const BQ = ${BQ};
      var<workgroup> qt : array<vec4<f32>, ${BQ * (hd / 4)}>;
      var<workgroup> dot_ : array<vec4<f32>, ${BQ * (hd / 4)}>;
      var<workgroup> lseT : array<f32, ${BQ}>;
      var<workgroup> dT : array<f32, ${BQ}>;
      fn main(index : i32) {
        let lane = i32(localId.x);
        let s0 = i32(workgroupId.x) * ${KEY_TILE};
        let h = i32(workgroupId.y);
        let b = i32(workgroupId.z);
        let s = s0 + lane;
        let live = s < uniforms.S;
        let kvRow = rowsOfKv(b, h / (uniforms.H / uniforms.KV)) + s;
        let qBase = rowsOfHead(b, h);
        var seen = false;
        if (live) { seen = f32(Mask[b * uniforms.S + s]) > 0.5; }
        var k : array<vec4<f32>, HD4>;
        var v : array<vec4<f32>, HD4>;
        var dk : array<vec4<f32>, HD4>;
        var dv : array<vec4<f32>, HD4>;
        for (var c = 0; c < HD4; c++) {
          if (live) {
            k[c] = K[kvRow * HD4 + c] * uniforms.scale;
            v[c] = V[kvRow * HD4 + c];
          } else {
            k[c] = vec4<f32>(0.0);
            v[c] = vec4<f32>(0.0);
          }
          dk[c] = vec4<f32>(0.0);
          dv[c] = vec4<f32>(0.0);
        }
        // the first query that sees the tile's first key is at t = s0 - past (the bound is uniform)
        let tStart = uniformBound((max(0, s0 - uniforms.past) / BQ) * BQ);
        for (var t0 = tStart; t0 < uniforms.T; t0 += BQ) {
          workgroupBarrier();
          for (var i = lane; i < BQ * HD4; i += ${KEY_TILE}) {
            let t = t0 + i / HD4;
            if (t < uniforms.T) {
              let at = (qBase + t) * HD4 + i % HD4;
              qt[i] = Q[at];
              dot_[i] = DO[at];
            }
          }
          for (var i = lane; i < BQ; i += ${KEY_TILE}) {
            if (t0 + i < uniforms.T) {
              lseT[i] = LD[qBase + t0 + i];
              dT[i] = LD[allRows() + qBase + t0 + i];
            }
          }
          workgroupBarrier();
          if (seen) {
            let n = min(BQ, uniforms.T - t0);
            for (var i = 0; i < n; i++) {
              if (uniforms.past + t0 + i >= s) {
                var sc = 0.0;
                var dp = 0.0;
                for (var c = 0; c < HD4; c++) {
                  sc += dot(qt[i * HD4 + c], k[c]);
                  dp += dot(dot_[i * HD4 + c], v[c]);
                }
                let p = exp(sc - lseT[i]);
                let ds = p * (dp - dT[i]);
                for (var c = 0; c < HD4; c++) {
                  dv[c] += p * dot_[i * HD4 + c];
                  dk[c] += ds * qt[i * HD4 + c];
                }
              }
            }
          }
        }
        if (live) {
          let out = (qBase / uniforms.T * uniforms.S + s) * HD;
          for (var c = 0; c < HD4; c++) {
            let gk = dk[c] * uniforms.scale;
            let gv = dv[c];
            for (var e = 0; e < 4; e++) {
              result[out + c * 4 + e] = gk[e];
              result[uniforms.B * uniforms.H * uniforms.S * HD + out + c * 4 + e] = gv[e];
            }
          }
        }
      }`,
  };
}

/** Backward step 4: the sum over the G query heads of each kv head, from a part of the packed dk/dv buffer. */
function sumHeadsProgram(d: AttentionDims): Program {
  const { B, KV, S, hd } = d;
  const G = d.H / KV;
  return elementwise([B, KV, S, hd], `t2s_attention_sumheads_${G}`, ["P"], "offset : i32, per : i32,", `
          let per = uniforms.per;
          let bk = index / per;
          let rest = index - bk * per;
          var acc = 0.0;
          for (var g = 0; g < ${G}; g++) { acc += P[uniforms.offset + (bk * ${G} + g) * per + rest]; }
          result[index] = acc;`);
}

/** Copies the context out of the packed forward buffer (its first B·H·T·hd entries). */
function contextProgram(shape: number[]): Program {
  return elementwise(shape, "t2s_attention_context", ["W"], "", `
          result[index] = W[index];`);
}

function dimsOf(q: tf.TensorInfo, k: tf.TensorInfo): AttentionDims {
  const [B, H, T, hd] = q.shape;
  const [, KV, S] = k.shape;
  return { B, H, KV, T, S, hd };
}

function checkShapes(q: tf.TensorInfo, k: tf.TensorInfo, v: tf.TensorInfo, mask: tf.TensorInfo, past: number): void {
  const [B, H, T, hd] = q.shape;
  const [kb, KV, S, khd] = k.shape;
  const ok =
    q.shape.length === 4 && k.shape.length === 4 && v.shape.join() === k.shape.join() && kb === B && khd === hd && H % KV === 0 &&
    mask.shape.join() === [B, S].join() && hd % 4 === 0 && hd >= 4 && hd <= 128 && past >= 0 && past + T <= S;
  if (!ok) {
    throw new RangeError(`fused attention: bad shapes q ${q.shape} k ${k.shape} v ${v.shape} keyValid ${mask.shape} past ${past} (need q [B,H,T,hd], k and v [B,KV,S,hd], keyValid [B,S], H % KV = 0, hd a multiple of 4 up to 128, past + T <= S)`);
  }
}

let registered = false;

/** Registers the forward and backward kernels and the gradient (once). */
export function registerAttentionKernels(): void {
  if (registered) return;
  registered = true;
  tf.registerKernel({
    kernelName: ATTENTION,
    backendName: "webgpu",
    kernelFunc: ({ inputs, backend, attrs }) => {
      const gpu = backend as unknown as WebGpuBackendLike;
      const { q, k, v, keyValid } = inputs as Record<string, tf.TensorInfo>;
      const { past, scale } = attrs as unknown as { past: number; scale: number };
      checkShapes(q, k, v, keyValid, past);
      const d = dimsOf(q, k);
      const packed = gpu.runWebGPUProgram(forwardProgram(d, keyValid.dtype), [q, k, v, keyValid], "float32", shapeUniforms(d, past, scale));
      const ctx = gpu.runWebGPUProgram(contextProgram(q.shape), [packed], "float32");
      return [ctx, packed];
    },
  });
  tf.registerKernel({
    kernelName: ATTENTION_GRAD,
    backendName: "webgpu",
    kernelFunc: ({ inputs, backend, attrs }) => {
      const gpu = backend as unknown as WebGpuBackendLike;
      const { q, k, v, keyValid, packed, dy } = inputs as Record<string, tf.TensorInfo>;
      const { past, scale } = attrs as unknown as { past: number; scale: number };
      const d = dimsOf(q, k);
      const N = d.B * d.H * d.T;
      const uniforms = shapeUniforms(d, past, scale);
      const stats = gpu.runWebGPUProgram(rowStatsProgram(d), [packed, dy], "float32", [{ type: "int32", data: [N] }]);
      const dq = gpu.runWebGPUProgram(dqProgram(d, keyValid.dtype), [q, k, v, keyValid, dy, stats], "float32", uniforms);
      const perHead = gpu.runWebGPUProgram(dkvProgram(d, keyValid.dtype), [q, k, v, keyValid, dy, stats], "float32", uniforms);
      const half = d.B * d.H * d.S * d.hd;
      const per: Uniform = { type: "int32", data: [d.S * d.hd] };
      const dk = gpu.runWebGPUProgram(sumHeadsProgram(d), [perHead], "float32", [{ type: "int32", data: [0] }, per]);
      const dv = gpu.runWebGPUProgram(sumHeadsProgram(d), [perHead], "float32", [{ type: "int32", data: [half] }, per]);
      gpu.disposeData(stats.dataId);
      gpu.disposeData(perHead.dataId);
      return [dq, dk, dv];
    },
  });
  tf.registerGradient({
    kernelName: ATTENTION,
    inputsToSave: ["q", "k", "v", "keyValid"],
    outputsToSave: [false, true],
    gradFunc: (dys: tf.Tensor | tf.Tensor[], saved: tf.Tensor[], attrs: unknown) => {
      const dy = (Array.isArray(dys) ? dys[0] : dys) as tf.Tensor;
      const [q, k, v, keyValid, packed] = saved;
      const [dq, dk, dv] = tf.engine().runKernel(ATTENTION_GRAD, { q, k, v, keyValid, packed, dy }, attrs as tf.NamedAttrMap) as tf.Tensor[];
      return { q: () => dq, k: () => dk, v: () => dv, keyValid: () => tf.cast(tf.zerosLike(keyValid), "float32") };
    },
  });
}

/**
 * Causal grouped-query attention on the webgpu backend: q [B, H, T, hd] (queries at positions past..past+T-1),
 * k and v [B, KV, S, hd] (S >= past + T), keyValid [B, S] (1 where the key is a real token; float32 or
 * int32). Returns the context [B, H, T, hd]; differentiable in q, k and v. `scale` multiplies q·k (usually
 * 1 / sqrt(hd)).
 */
export function attentionFused(q: tf.Tensor, k: tf.Tensor, v: tf.Tensor, keyValid: tf.Tensor, past: number, scale: number): tf.Tensor4D {
  registerAttentionKernels();
  const [ctx, packed] = tf.engine().runKernel(ATTENTION, { q, k, v, keyValid }, { past, scale }) as tf.Tensor[];
  // the packed buffer lives on only as the gradient's saved copy (when a tape records)
  packed.dispose();
  return ctx as tf.Tensor4D;
}
