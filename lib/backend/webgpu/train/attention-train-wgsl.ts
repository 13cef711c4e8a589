/**
 * The WGSL programs of the fused training attention (lib/backend/webgpu/train/attention-train.ts registers them
 * as tfjs kernels). Tiles, for hd 64:
 *   forward, dq   a workgroup of 64 threads per (64-query tile, head, batch row); each thread keeps its
 *                 query (and for dq its dO row and dq) in registers; K and V stream through workgroup
 *                 memory 32 keys at a time (8 KB each), so every key read from global memory serves 64
 *                 queries; the loop stops at the tile's last visible key (causal).
 *   dk/dv         a workgroup of 64 threads per (64-key tile, query head, batch row); each thread keeps its
 *                 key and value rows and their gradients in registers; Q and dO stream through workgroup
 *                 memory 32 queries at a time, starting at the first query that sees the tile.
 * Scores are summed four keys (or queries) at a time, so each thread runs four independent chains. Workgroup
 * memory stays under 26 KB (tfjs asks Dawn for the adapter's limit: 32 KB on Mesa's software driver).
 */
import { elementwise, type Program, type Uniform } from "./program.js";

/** A program whose inputs may be read as vectors (tfjs-backend-webgpu's `variableComponents`). */
type VectorProgram = Program & { variableComponents: number[] };

/** Rows per workgroup, one thread each: queries in the forward and dq, keys in dk/dv. */
const TILE = 64;

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
  /** q, the context and their gradients laid out [B, T, H, hd] (the decoder's own layout) instead of [B, H, T, hd]. */
  tokenMajor: boolean;
}

const SHAPE_UNIFORMS = "B : i32, H : i32, KV : i32, T : i32, S : i32, past : i32, scale : f32,";

export function shapeUniforms(d: AttentionDims, past: number, scale: number): Uniform[] {
  const i = (x: number): Uniform => ({ type: "int32", data: [x] });
  return [i(d.B), i(d.H), i(d.KV), i(d.T), i(d.S), i(past), { type: "float32", data: [scale] }];
}

/** What the compiled pipeline depends on besides the input ranks and dtypes (tfjs adds those to the key). */
function keyOf(name: string, d: AttentionDims, step: number): string {
  return `t2s_attention_${name}_${d.hd}_${step}_${d.tokenMajor ? "bthd" : "bhtd"}`;
}

/**
 * WGSL shared by the kernels. A query row (b, h, t) is row qRow(b, h, t) of q, dO, the context and dq
 * (in their layout), and the lse and D of that row sit at the same index.
 */
function preamble(d: AttentionDims): string {
  return `
      const HD4 = ${d.hd / 4};
      const HD = ${d.hd};
      fn qRow(b : i32, h : i32, t : i32) -> i32 {
        ${d.tokenMajor ? "return (b * uniforms.T + t) * uniforms.H + h;" : "return (b * uniforms.H + h) * uniforms.T + t;"}
      }
      fn rowsOfKv(b : i32, kv : i32) -> i32 { return (b * uniforms.KV + kv) * uniforms.S; }
      // query rows of all heads (B·H·T): where the second part of a packed buffer starts, in rows
      fn allRows() -> i32 { return uniforms.B * uniforms.H * uniforms.T; }
      fn keySeen(b : i32, s : i32) -> bool { return s < uniforms.S && f32(Mask[b * uniforms.S + s]) > 0.5; }
      // loop bounds computed from workgroupId (a private variable) are not uniform to the compiler; one
      // thread's copy read back with workgroupUniformLoad is
      var<workgroup> boundShared : i32;
      fn uniformBound(x : i32) -> i32 {
        if (localId.x == 0u) { boundShared = x; }
        return workgroupUniformLoad(&boundShared);
      }`;
}

/** WGSL: the K and V rows k0..k0+BK-1 of kv head base (zeros past S) and their key mask into workgroup memory. */
function loadKeyTile(threads: number): string {
  return `
          for (var i = lane; i < BK * HD4; i += ${threads}) {
            let s = k0 + i / HD4;
            var kx = vec4<f32>(0.0);
            var vx = vec4<f32>(0.0);
            if (s < uniforms.S) {
              let at = (kvBase + s) * HD4 + i % HD4;
              kx = K[at];
              vx = V[at];
            }
            kt[i] = kx;
            vt[i] = vx;
          }
          for (var j = lane; j < BK; j += ${threads}) {
            seen[j] = select(0.0, 1.0, keySeen(b, k0 + j));
          }`;
}

/** WGSL: the scores of this thread's query (q, scaled) against keys j0..j0+3 of the tile: four independent sums. */
const SCORES4 = `
              var s4 = vec4<f32>(0.0);
              for (var c = 0; c < HD4; c++) {
                let qc = q[c];
                s4 += vec4<f32>(dot(qc, kt[j0 * HD4 + c]), dot(qc, kt[(j0 + 1) * HD4 + c]), dot(qc, kt[(j0 + 2) * HD4 + c]), dot(qc, kt[(j0 + 3) * HD4 + c]));
              }
              let key4 = vec4<i32>(k0 + j0) + vec4<i32>(0, 1, 2, 3);
              let vis4 = (vec4<f32>(seen[j0], seen[j0 + 1], seen[j0 + 2], seen[j0 + 3]) > vec4<f32>(0.5)) & (key4 <= vec4<i32>(myPos));`;

/**
 * A program of one 64-thread workgroup per (tile, head, batch row): `tiles` tiles along x. `decls` are its
 * workgroup arrays; `body` runs in main() after lane, tile0 (the tile's first row), h, b and kvBase (the
 * first row of h's kv head in K and V) are set. The backward programs also read dO and the [lse | D] rows.
 */
function tileProgram(d: AttentionDims, name: string, step: number, tiles: number, outputShape: number[], backward: boolean, decls: string, body: string): VectorProgram {
  return {
    variableNames: backward ? ["Q", "K", "V", "Mask", "DO", "LD"] : ["Q", "K", "V", "Mask"],
    variableComponents: backward ? [4, 4, 4, 1, 4, 1] : [4, 4, 4, 1],
    outputShape,
    shaderKey: keyOf(name, d, step),
    dispatchLayout: { x: [0] },
    dispatch: [tiles, d.H, d.B],
    workgroupSize: [TILE, 1, 1],
    uniforms: SHAPE_UNIFORMS,
    getUserCode: () => `${preamble(d)}
      ${decls}
      fn main(index : i32) {
        let lane = i32(localId.x);
        let tile0 = i32(workgroupId.x) * ${TILE};
        let h = i32(workgroupId.y);
        let b = i32(workgroupId.z);
        let kvBase = rowsOfKv(b, h / (uniforms.H / uniforms.KV));
        ${body}
      }`,
  };
}

/**
 * Forward: one workgroup per (query tile, head, batch row), one thread per query row. Writes the packed
 * buffer [context (q's layout) | lse [B·H·T]].
 */
export function forwardProgram(d: AttentionDims): VectorProgram {
  const { B, H, T, hd } = d;
  const BK = keyStep(hd);
  return tileProgram(d, "fwd", BK, Math.ceil(T / TILE), [B * H * T * (hd + 1)], false, `
      const BK = ${BK};
      const SC = ${BK + 1};
      var<workgroup> kt : array<vec4<f32>, ${BK * (hd / 4)}>;
      var<workgroup> vt : array<vec4<f32>, ${BK * (hd / 4)}>;
      var<workgroup> seen : array<f32, ${BK}>;
      // each thread's scores of the current key tile (rows padded by one: no bank conflicts)
      var<workgroup> sc : array<f32, ${TILE * (BK + 1)}>;`, `
        let t0 = tile0;
        let t = t0 + lane;
        let live = t < uniforms.T;
        let myPos = uniforms.past + t;
        let row = qRow(b, h, t);
        var q : array<vec4<f32>, HD4>;
        var acc : array<vec4<f32>, HD4>;
        for (var c = 0; c < HD4; c++) {
          if (live) { q[c] = Q[row * HD4 + c] * uniforms.scale; } else { q[c] = vec4<f32>(0.0); }
          acc[c] = vec4<f32>(0.0);
        }
        var m = -3.0e38;
        var l = 0.0;
        // keys past the last query's position are masked for the whole tile: the loop stops there
        let kEnd = uniformBound(min(uniforms.S, uniforms.past + min(t0 + ${TILE}, uniforms.T)));
        for (var k0 = 0; k0 < kEnd; k0 += BK) {
          workgroupBarrier();
          ${loadKeyTile(TILE)}
          workgroupBarrier();
          var tileMax = -3.0e38;
          for (var j0 = 0; j0 < BK; j0 += 4) {
            ${SCORES4}
            let masked = select(vec4<f32>(-3.0e38), s4, vis4);
            tileMax = max(tileMax, max(max(masked.x, masked.y), max(masked.z, masked.w)));
            for (var e = 0; e < 4; e++) { sc[lane * SC + j0 + e] = masked[e]; }
          }
          if (tileMax > -1.0e38) {
            let mNew = max(m, tileMax);
            let corr = exp(m - mNew);
            l = l * corr;
            for (var c = 0; c < HD4; c++) { acc[c] = acc[c] * corr; }
            // a masked score (-3e38) gives exactly 0 here, without a branch
            for (var j = 0; j < BK; j++) {
              let p = exp(sc[lane * SC + j] - mNew);
              l += p;
              for (var c = 0; c < HD4; c++) { acc[c] += p * vt[j * HD4 + c]; }
            }
            m = mNew;
          }
        }
        if (live) {
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
        }`);
}

/** Backward step 1: [lse [N] | D [N]] with D = rowsum(dO * O), read from the packed forward buffer. */
export function rowStatsProgram(d: AttentionDims): Program {
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
export function dqProgram(d: AttentionDims): VectorProgram {
  const { B, H, T, hd } = d;
  const BK = keyStep(hd);
  return tileProgram(d, "dq", BK, Math.ceil(T / TILE), d.tokenMajor ? [B, T, H, hd] : [B, H, T, hd], true, `
      const BK = ${BK};
      var<workgroup> kt : array<vec4<f32>, ${BK * (hd / 4)}>;
      var<workgroup> vt : array<vec4<f32>, ${BK * (hd / 4)}>;
      var<workgroup> seen : array<f32, ${BK}>;`, `
        let t0 = tile0;
        let t = t0 + lane;
        let live = t < uniforms.T;
        // a thread past T has no visible key (myPos < 0), so it adds nothing
        let myPos = select(-1, uniforms.past + t, live);
        let row = qRow(b, h, t);
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
        let kEnd = uniformBound(min(uniforms.S, uniforms.past + min(t0 + ${TILE}, uniforms.T)));
        for (var k0 = 0; k0 < kEnd; k0 += BK) {
          workgroupBarrier();
          ${loadKeyTile(TILE)}
          workgroupBarrier();
          for (var j0 = 0; j0 < BK; j0 += 4) {
            ${SCORES4}
            var dp4 = vec4<f32>(0.0);
            for (var c = 0; c < HD4; c++) {
              let oc = dout[c];
              dp4 += vec4<f32>(dot(oc, vt[j0 * HD4 + c]), dot(oc, vt[(j0 + 1) * HD4 + c]), dot(oc, vt[(j0 + 2) * HD4 + c]), dot(oc, vt[(j0 + 3) * HD4 + c]));
            }
            // select, not a product: exp of a future key's score may overflow
            let ds4 = select(vec4<f32>(0.0), exp(s4 - vec4<f32>(lse)), vis4) * (dp4 - vec4<f32>(dsum));
            for (var c = 0; c < HD4; c++) {
              dq[c] += ds4.x * kt[j0 * HD4 + c] + ds4.y * kt[(j0 + 1) * HD4 + c] + ds4.z * kt[(j0 + 2) * HD4 + c] + ds4.w * kt[(j0 + 3) * HD4 + c];
            }
          }
        }
        if (live) {
          for (var c = 0; c < HD4; c++) {
            let g = dq[c] * uniforms.scale;
            for (var e = 0; e < 4; e++) { result[row * HD + c * 4 + e] = g[e]; }
          }
        }`);
}

/**
 * Backward step 3: dk and dv of every query head, packed [dk [B, H, S, hd] | dv [B, H, S, hd]]; one
 * workgroup per (key tile, head, batch row), one thread per key row, looping over the queries that see
 * the tile. Per query head rather than per kv head, so B·H·S/64 workgroups fill the GPU even with KV = 2.
 */
export function dkvProgram(d: AttentionDims): VectorProgram {
  const { B, H, S, hd } = d;
  const BQ = queryStep(hd);
  return tileProgram(d, "dkv", BQ, Math.ceil(S / TILE), [2 * B * H * S * hd], true, `
      const BQ = ${BQ};
      var<workgroup> qt : array<vec4<f32>, ${BQ * (hd / 4)}>;
      var<workgroup> gt : array<vec4<f32>, ${BQ * (hd / 4)}>;
      var<workgroup> lseT : array<f32, ${BQ}>;
      var<workgroup> dT : array<f32, ${BQ}>;`, `
        let s0 = tile0;
        let s = s0 + lane;
        let live = s < uniforms.S;
        let kvRow = kvBase + s;
        // an invalid key (or a thread past S) is seen by no query: its gradients stay 0
        let seen = live && keySeen(b, s);
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
          for (var i = lane; i < BQ * HD4; i += ${TILE}) {
            let t = t0 + i / HD4;
            var qx = vec4<f32>(0.0);
            var gx = vec4<f32>(0.0);
            if (t < uniforms.T) {
              let at = qRow(b, h, t) * HD4 + i % HD4;
              qx = Q[at];
              gx = DO[at];
            }
            qt[i] = qx;
            gt[i] = gx;
          }
          for (var i = lane; i < BQ; i += ${TILE}) {
            var lx = 0.0;
            var dx = 0.0;
            if (t0 + i < uniforms.T) {
              lx = LD[qRow(b, h, t0 + i)];
              dx = LD[allRows() + qRow(b, h, t0 + i)];
            }
            lseT[i] = lx;
            dT[i] = dx;
          }
          workgroupBarrier();
          if (seen) {
            for (var i0 = 0; i0 < BQ; i0 += 4) {
              var s4 = vec4<f32>(0.0);
              var dp4 = vec4<f32>(0.0);
              for (var c = 0; c < HD4; c++) {
                let kc = k[c];
                let vc = v[c];
                s4 += vec4<f32>(dot(qt[i0 * HD4 + c], kc), dot(qt[(i0 + 1) * HD4 + c], kc), dot(qt[(i0 + 2) * HD4 + c], kc), dot(qt[(i0 + 3) * HD4 + c], kc));
                dp4 += vec4<f32>(dot(gt[i0 * HD4 + c], vc), dot(gt[(i0 + 1) * HD4 + c], vc), dot(gt[(i0 + 2) * HD4 + c], vc), dot(gt[(i0 + 3) * HD4 + c], vc));
              }
              let t4 = vec4<i32>(t0 + i0) + vec4<i32>(0, 1, 2, 3);
              let vis4 = (t4 < vec4<i32>(uniforms.T)) & (vec4<i32>(uniforms.past) + t4 >= vec4<i32>(s));
              let p4 = select(vec4<f32>(0.0), exp(s4 - vec4<f32>(lseT[i0], lseT[i0 + 1], lseT[i0 + 2], lseT[i0 + 3])), vis4);
              let ds4 = p4 * (dp4 - vec4<f32>(dT[i0], dT[i0 + 1], dT[i0 + 2], dT[i0 + 3]));
              for (var c = 0; c < HD4; c++) {
                dv[c] += p4.x * gt[i0 * HD4 + c] + p4.y * gt[(i0 + 1) * HD4 + c] + p4.z * gt[(i0 + 2) * HD4 + c] + p4.w * gt[(i0 + 3) * HD4 + c];
                dk[c] += ds4.x * qt[i0 * HD4 + c] + ds4.y * qt[(i0 + 1) * HD4 + c] + ds4.z * qt[(i0 + 2) * HD4 + c] + ds4.w * qt[(i0 + 3) * HD4 + c];
              }
            }
          }
        }
        if (live) {
          let out = ((b * uniforms.H + h) * uniforms.S + s) * HD;
          let half = uniforms.B * uniforms.H * uniforms.S * HD;
          for (var c = 0; c < HD4; c++) {
            let gk = dk[c] * uniforms.scale;
            let gv = dv[c];
            for (var e = 0; e < 4; e++) {
              result[out + c * 4 + e] = gk[e];
              result[half + out + c * 4 + e] = gv[e];
            }
          }
        }`);
}

/** Backward step 4: the sum over the G query heads of each kv head, from a part of the packed dk/dv buffer. */
export function sumHeadsProgram(d: AttentionDims): Program {
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
export function contextProgram(shape: number[]): Program {
  return elementwise(shape, "t2s_attention_context", ["W"], "", `
          result[index] = W[index];`);
}

