/**
 * The decoder's math: RMSNorm, half-split rotary, grouped-query attention over a KV cache, SwiGLU, and
 * LoRA on any linear layer (unmerged: y = xW^T + b + s·(xA^T)B^T). Functions here are pure tf ops, so
 * they are differentiable when the weights are tf.Variables; callers wrap them in tf.tidy.
 */
import { tf } from "../backend/tf.js";
import type { ModelConfig } from "./config.js";
import { matMulWeightT, prefersPlainMatMul } from "./layout.js";
import { rotaryTables } from "./rope.js";
import { packFlat, recomputedInBackward, unpackFlat } from "./recompute.js";
import { dense, gatherRows, weightShape, type WeightMatrix } from "./packed.js";
import { attendChunk, attendOneRow, attendWithShared, attentionBias, type SharedPrefix } from "./attention.js";

export type { SharedPrefix };
import { attentionFused, attentionFusedSupports } from "../backend/webgpu/train/attention-train.js";
import { fusedKernelsActive } from "../backend/webgpu/train/fused.js";
import { rmsNormFused } from "../backend/webgpu/train/layer-kernels.js";
import { ropeFused, swigluFused } from "../backend/webgpu/train/rope-swiglu.js";
import { loraLinearFused } from "../backend/webgpu/train/lora-linear.js";

/** Attention scores held at once (B·heads·queries·keys) before queries are split into chunks. */
const CHUNK_SCORES = 1 << 24;

/** One LoRA pair on a linear layer: A is [r, in], B is [out, r], applied with `scale`. */
export interface LoraPair {
  a: tf.Tensor2D;
  b: tf.Tensor2D;
  scale: number;
}

/** A linear layer in the nn.Linear layout: weight [out, in], optional bias [out], named LoRA pairs. */
export interface Linear {
  /** float32, or 16-bit packed (lib/model/packed.ts) for a frozen base. */
  weight: WeightMatrix;
  bias?: tf.Tensor1D;
  lora?: Map<string, LoraPair>;
}

export interface LayerWeights {
  inputNorm: tf.Tensor1D;
  postNorm: tf.Tensor1D;
  q: Linear;
  k: Linear;
  v: Linear;
  o: Linear;
  gate: Linear;
  up: Linear;
  down: Linear;
  qNorm?: tf.Tensor1D;
  kNorm?: tf.Tensor1D;
}

export interface DecoderWeights {
  embed: WeightMatrix;
  layers: LayerWeights[];
  norm: tf.Tensor1D;
  /** Absent when the embeddings are tied. */
  lmHead?: WeightMatrix;
}

/**
 * Keys and values of every layer ([B, kvHeads, S, headDim] each; [1, ...] when every row has the same past,
 * broadcast inside each layer) plus which cached slots are real tokens (padding slots stay in the cache but
 * are never attended to).
 */
export interface KvCache {
  keys: tf.Tensor4D[];
  values: tf.Tensor4D[];
  /** valid[b][s]: whether slot s of row b holds a real token. */
  valid: boolean[][];
  /**
   * A prefix every row attends to, stored once. When present, keys/values/valid hold only the tokens after
   * it (an empty own part has no tensors: keys and values are [] and every valid row is []).
   */
  shared?: SharedPrefix;
}

/** The new tokens of one forward step: B rows of T ids, their absolute positions, and which are real. */
export interface StepInput {
  ids: number[][];
  positions: number[][];
  valid: boolean[][];
}

/** RMSNorm over the last axis with weight w (one fused kernel on WebGPU). */
export function rmsNorm(x: tf.Tensor, w: tf.Tensor1D, eps: number): tf.Tensor {
  if (fusedKernelsActive()) return rmsNormFused(x, w, eps);
  const variance = tf.mean(tf.square(x), -1, true);
  return tf.mul(tf.mul(x, tf.rsqrt(tf.add(variance, eps))), w);
}

/** silu(gate) · up, the SwiGLU activation (one fused kernel on WebGPU). */
export function swiglu(gate: tf.Tensor, up: tf.Tensor): tf.Tensor {
  if (fusedKernelsActive()) return swigluFused(gate, up);
  return tf.mul(tf.mul(gate, tf.sigmoid(gate)), up);
}

/** Applies a linear layer (with the named adapter's LoRA pair when it has one) to x [..., in]. */
export function linear(x: tf.Tensor, l: Linear, adapter?: string | null): tf.Tensor {
  const shape = x.shape;
  const inDim = shape[shape.length - 1];
  const x2 = tf.reshape(x, [-1, inDim]) as tf.Tensor2D;
  const pair = adapter ? l.lora?.get(adapter) : undefined;
  let y: tf.Tensor;
  // a 16-bit base is widened here, for this product only (the caller's scope frees the copy)
  const weight = dense(l.weight);
  if (pair && fusedKernelsActive()) {
    // base and LoRA products in one kernel, the LoRA term added onto the base by the GEMM itself
    y = loraLinearFused(x2, weight, pair.a, pair.b, pair.scale);
    if (l.bias) y = tf.add(y, l.bias);
  } else {
    y = matMulWeightT(x2, weight);
    if (l.bias) y = tf.add(y, l.bias);
    if (pair) y = tf.add(y, tf.mul(matMulWeightT(matMulWeightT(x2, pair.a), pair.b), pair.scale));
  }
  return tf.reshape(y, [...shape.slice(0, -1), weightShape(l.weight)[0]]);
}

/**
 * The signed permutation R with x·R = rotate_half(x) = [-x2, x1]. A small matmul instead of split + concat:
 * slicing the last axis is slow on the CPU backend, and one matmul kernel suits every backend.
 */
export function rotateHalfMatrix(d: number): tf.Tensor2D {
  const half = d / 2;
  const r = new Float32Array(d * d);
  for (let j = 0; j < half; j++) {
    r[(j + half) * d + j] = -1;
    r[j * d + j + half] = 1;
  }
  return tf.tensor2d(r, [d, d]);
}

/** x · cos + rotate_half(x) · sin for x [B, T, heads, hd] and cos/sin [B, T, 1, hd] (one fused kernel on WebGPU). */
export function rotate(x: tf.Tensor, cos: tf.Tensor, sin: tf.Tensor, rot: tf.Tensor2D): tf.Tensor {
  if (fusedKernelsActive()) return ropeFused(x, cos, sin);
  const shape = x.shape;
  const d = shape[shape.length - 1];
  const rotated = tf.reshape(tf.matMul(tf.reshape(x, [-1, d]) as tf.Tensor2D, rot), shape);
  return tf.add(tf.mul(x, cos), tf.mul(rotated, sin));
}

/** What every layer of one step reads besides its input: rotary tables and the attention mask. */
interface LayerConstants {
  cosT: tf.Tensor;
  sinT: tf.Tensor;
  rot: tf.Tensor2D;
  bias: tf.Tensor | null;
  keyMask: tf.Tensor | null;
}

/** The trainable tensors a layer's output depends on: its adapter's LoRA pairs, or its weights when they are variables. */
function trainableTensors(l: LayerWeights, adapter: string | null): tf.Variable[] {
  const out: tf.Variable[] = [];
  const add = (t: unknown) => {
    if (t instanceof tf.Variable && t.trainable) out.push(t);
  };
  for (const t of [l.inputNorm, l.postNorm, l.qNorm, l.kNorm]) add(t);
  for (const lin of [l.q, l.k, l.v, l.o, l.gate, l.up, l.down]) {
    add(lin.weight);
    add(lin.bias);
    const pair = adapter ? lin.lora?.get(adapter) : undefined;
    if (pair) {
      add(pair.a);
      add(pair.b);
    }
  }
  return out;
}

/**
 * Runs the decoder on one step of new tokens after `cache` (none for a fresh batch). Returns the logits
 * ([B, T, V], or [B, V] of the last position when `lastOnly`; the hidden states [B, T, D] instead with
 * `hiddenOnly`) and the grown cache. The caller owns both
 * and disposes the old cache; call inside tf.tidy and keep what it returns.
 */
export function decoderStep(
  c: ModelConfig,
  w: DecoderWeights,
  invFreq: Float32Array,
  input: StepInput,
  cache: KvCache | null,
  opts: { lastOnly?: boolean; adapter?: string | null; chunkScores?: number; hiddenOnly?: boolean; recompute?: boolean; cacheOut?: boolean } = {},
): { logits: tf.Tensor; cache: KvCache } {
  const B = input.ids.length;
  const T = input.ids[0].length;
  const past = cache ? cache.valid[0].length : 0;
  const shared = cache?.shared;
  const ownPast = cache !== null && cache.keys.length > 0;
  const H = c.numHeads;
  const KV = c.numKvHeads;
  const G = H / KV;
  const hd = c.headDim;
  const adapter = opts.adapter ?? null;
  const valid = input.valid.map((row, r) => (cache ? cache.valid[r].concat(row) : row.slice()));
  const { cos, sin } = rotaryTables(input.positions.flat(), invFreq);
  const cosT = tf.tensor(cos, [B, T, 1, hd]);
  const sinT = tf.tensor(sin, [B, T, 1, hd]);
  // the fused WebGPU kernel masks from the [B, S] key mask itself; the ops path adds a [B, 1, T, S] bias
  const fusedAttention = !shared && fusedKernelsActive() && attentionFusedSupports(hd);
  const keyMask = fusedAttention ? tf.tensor2d(valid.map((row) => row.map((v) => (v ? 1 : 0))), [B, past + T]) : null;
  const bias = fusedAttention ? null : attentionBias(valid, past, T);
  const scale = 1 / Math.sqrt(hd);
  const rot = rotateHalfMatrix(hd);
  let x: tf.Tensor = gatherRows(w.embed, tf.tensor2d(input.ids, [B, T], "int32"));
  const keys: tf.Tensor4D[] = [];
  const values: tf.Tensor4D[] = [];
  const S = past + T;
  // long prompts attend in query chunks, so the score matrix never holds more than ~CHUNK_SCORES floats
  const seen = S + (shared ? shared.length : 0);
  const chunk = Math.max(1, Math.min(T, Math.floor((opts.chunkScores ?? CHUNK_SCORES) / Math.max(1, B * H * seen))));
  const plain = prefersPlainMatMul();
  // recompute: only each layer's input and the past keys/values it reads outlive the forward; the backward
  // runs the layer again. The new keys/values come out only with `cacheOut` (the trainer's shared prompt
  // prefix); a serving cache with a shared part is never trained through.
  const recompute = opts.recompute === true && !shared;
  const constants: LayerConstants = { cosT, sinT, rot, bias, keyMask };
  w.layers.forEach((l, i) => {
    const layer = (x: tf.Tensor, consts: LayerConstants, pastK: tf.Tensor4D | null, pastV: tf.Tensor4D | null) => {
      const { cosT, sinT, rot, bias, keyMask } = consts;
      const h = rmsNorm(x, l.inputNorm, c.rmsNormEps);
      let q = tf.reshape(linear(h, l.q, adapter), [B, T, H, hd]);
      let k = tf.reshape(linear(h, l.k, adapter), [B, T, KV, hd]);
      const v = tf.reshape(linear(h, l.v, adapter), [B, T, KV, hd]);
      if (l.qNorm && l.kNorm) {
        q = rmsNorm(q, l.qNorm, c.rmsNormEps);
        k = rmsNorm(k, l.kNorm, c.rmsNormEps);
      }
      // the fused kernel reads the queries token-major ([B, T, H, hd]) and gives the context so: no transposes
      q = rotate(q, cosT, sinT, rot);
      if (!keyMask) q = tf.transpose(q, [0, 2, 1, 3]);
      let kk = tf.transpose(rotate(k, cosT, sinT, rot), [0, 2, 1, 3]) as tf.Tensor4D;
      let vv = tf.transpose(v, [0, 2, 1, 3]) as tf.Tensor4D;
      if (pastK && pastV) {
        // a batch-1 past (the trainer's shared prompt prefix) is broadcast to the rows here, inside the layer:
        // a recomputed layer then keeps the prefix's keys and values once, not once per row
        const rows = (t: tf.Tensor4D) => (t.shape[0] === B ? t : (tf.broadcastTo(t, [B, t.shape[1], t.shape[2], t.shape[3]]) as tf.Tensor4D));
        kk = tf.concat([rows(pastK), kk], 2);
        vv = tf.concat([rows(pastV), vv], 2);
      }
      // keys laid out [B, KV, hd, S] where a transposed matmul is slow (see layout.ts)
      const kT = plain && !keyMask ? tf.transpose(kk, [0, 1, 3, 2]) : null;
      const pieces: tf.Tensor[] = [];
      if (keyMask) pieces.push(attentionFused(q, kk, vv, keyMask, past, scale, { tokenMajor: true }));
      else for (let t0 = 0; t0 < T; t0 += chunk) {
        const tc = Math.min(chunk, T - t0);
        const qc = tc === T ? q : tf.slice(q, [0, 0, t0, 0], [B, H, tc, hd]);
        const bc = tc === T ? bias! : tf.slice(bias!, [0, 0, t0, 0], [B, 1, tc, S]);
        // queries of the G heads sharing one kv head are stacked, so k and v are never repeated in memory;
        // [B, KV, G*tc, S] is laid out as [B, H, tc, S], so the mask broadcasts over heads in rank 4
        const qg = tf.reshape(qc, [B, KV, G * tc, hd]);
        if (shared) {
          pieces.push(attendWithShared(qg, kT ?? kk, kT !== null, vv, bc, shared, i, { B, H, KV, G, tc, hd, scale }));
          continue;
        }
        if (kT && B === 1) {
          pieces.push(attendOneRow(qg, kT, vv, bc, { H, KV, G, tc, hd, scale }));
          continue;
        }
        pieces.push(attendChunk(qg, kT ?? kk, kT !== null, vv, bc, scale));
      }
      const ctx = pieces.length === 1 ? pieces[0] : tf.concat(pieces, 2);
      const merged = tf.reshape(keyMask ? ctx : tf.transpose(ctx, [0, 2, 1, 3]), [B, T, H * hd]);
      let y = tf.add(x, linear(merged, l.o, adapter));
      const h2 = rmsNorm(y, l.postNorm, c.rmsNormEps);
      const gate = linear(h2, l.gate, adapter);
      const act = swiglu(gate, linear(h2, l.up, adapter));
      y = tf.add(y, linear(act, l.down, adapter));
      return { y, kk, vv };
    };
    const pastK = ownPast ? cache!.keys[i] : null;
    const pastV = ownPast ? cache!.values[i] : null;
    if (recompute) {
      const inputs = pastK && pastV ? [x, pastK, pastV] : [x];
      const run = (ins: tf.Tensor[], k: LayerConstants) => layer(ins[0], k, (ins[1] as tf.Tensor4D) ?? null, (ins[2] as tf.Tensor4D) ?? null);
      const params = trainableTensors(l, adapter);
      if (!opts.cacheOut) {
        x = recomputedInBackward((ins, k) => run(ins, k).y, inputs, constants, params);
        return;
      }
      const kvShape = [B, KV, S, hd];
      const [y, kk, vv] = unpackFlat(recomputedInBackward((ins, k) => { const o = run(ins, k); return packFlat([o.y, o.kk, o.vv]); }, inputs, constants, params), [[B, T, c.hiddenSize], kvShape, kvShape]);
      x = y;
      keys.push(kk as tf.Tensor4D);
      values.push(vv as tf.Tensor4D);
      return;
    }
    // each layer in its own scope: only the residual stream and the new keys/values outlive it
    const out = tf.tidy(() => layer(x, constants, pastK, pastV));
    x = out.y;
    keys.push(out.kk);
    values.push(out.vv);
  });
  x = rmsNorm(x, w.norm, c.rmsNormEps);
  if (opts.lastOnly) x = tf.reshape(tf.slice(x, [0, T - 1, 0], [B, 1, c.hiddenSize]), [B, c.hiddenSize]);
  const head = w.lmHead ?? w.embed;
  // hiddenOnly: the final (normed) hidden states instead of logits, for callers that project only some positions
  const logits = opts.hiddenOnly ? x : linear(x, { weight: head });
  if (shared) shared.refs++;
  return { logits, cache: shared ? { keys, values, valid, shared } : { keys, values, valid } };
}

/**
 * Returns a cache for `rows` rows that all start with the prefix held in `prefix` (a batch-1 cache of real
 * tokens at positions 0..P-1, e.g. a system prompt): the prefix becomes the cache's shared part, stored once,
 * and the rows' own parts start empty. The caller still disposes `prefix`; the result is disposed with
 * disposeCache.
 */
export function shareCache(prefix: KvCache, rows: number): KvCache {
  if (prefix.shared || prefix.keys.length === 0 || prefix.valid.length !== 1 || prefix.valid[0].some((v) => !v)) {
    throw new RangeError("shareCache needs a batch-1 cache of real tokens without a shared part");
  }
  const keysTransposed = prefersPlainMatMul();
  const split = (t: tf.Tensor4D, transpose: boolean): tf.Tensor2D[] =>
    tf.tidy(() => {
      const [, KV, P, hd] = t.shape;
      const heads = KV === 1 ? [t] : tf.split(t, KV, 1);
      return heads.map((h) => {
        const m = tf.reshape(h, [P, hd]) as tf.Tensor2D;
        return transpose ? tf.transpose(m) : m;
      });
    });
  const shared: SharedPrefix = {
    keys: prefix.keys.map((k) => split(k, keysTransposed)),
    values: prefix.values.map((v) => split(v, false)),
    keysTransposed,
    length: prefix.valid[0].length,
    refs: 1,
  };
  return { keys: [], values: [], valid: Array.from({ length: rows }, () => []), shared };
}

/** Returns cache rows gathered by `rows` (e.g. the rows still sampling); a shared prefix is referenced, not copied. */
export function selectCacheRows(cache: KvCache, rows: number[]): KvCache {
  const idx = tf.tensor1d(rows, "int32");
  const keys = cache.keys.map((k) => tf.gather(k, idx) as tf.Tensor4D);
  const values = cache.values.map((v) => tf.gather(v, idx) as tf.Tensor4D);
  idx.dispose();
  const valid = rows.map((r) => cache.valid[r].slice());
  if (!cache.shared) return { keys, values, valid };
  cache.shared.refs++;
  return { keys, values, valid, shared: cache.shared };
}

/** Releases the tensors of a cache (its shared prefix once no other cache holds it). */
export function disposeCache(cache: KvCache | null | undefined): void {
  if (!cache) return;
  for (const t of cache.keys) t.dispose();
  for (const t of cache.values) t.dispose();
  const shared = cache.shared;
  // the cache lets go of its reference, so disposing it twice cannot free a part others still hold
  delete cache.shared;
  if (shared && --shared.refs === 0) {
    for (const t of [...shared.keys.flat(), ...shared.values.flat()]) t.dispose();
  }
}
