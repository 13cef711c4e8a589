/**
 * The tfjs-ops paths of the decoder's attention: the additive causal/padding bias, one chunk of queries over
 * the keys, and the two layouts some backends need (a shared prompt prefix held once; one 2-D matmul per kv
 * head for a single row). lib/model/decoder.ts picks among them, or the fused WebGPU kernel.
 */
import { tf } from "../backend/tf.js";

/**
 * The keys and values of a prefix common to all rows of a cache, kept at batch 1 and never copied per row.
 * Per layer, per kv head: keys are [hd, P] when `keysTransposed` (backends that want plain matmuls), else
 * [P, hd]; values are [P, hd]. Every cache holding it counts as one reference: decoderStep and
 * selectCacheRows add one, disposeCache drops one and frees the tensors when none is left.
 */
export interface SharedPrefix {
  keys: tf.Tensor2D[][];
  values: tf.Tensor2D[][];
  keysTransposed: boolean;
  /** Tokens in the prefix (P); they sit at positions 0..P-1. */
  length: number;
  refs: number;
}

/** Additive attention bias [B, 1, T, S]: 0 where query t may see key s, a large negative otherwise. */
export function attentionBias(valid: boolean[][], past: number, t: number): tf.Tensor {
  const b = valid.length;
  const s = past + t;
  const bias = new Float32Array(b * t * s);
  for (let r = 0; r < b; r++) {
    const row = valid[r];
    for (let q = 0; q < t; q++) {
      const base = (r * t + q) * s;
      for (let k = 0; k < s; k++) bias[base + k] = row[k] && k <= past + q ? 0 : -1e9;
    }
  }
  return tf.tensor(bias, [b, 1, t, s]);
}

/**
 * The ops path's attention of one query chunk qg [B, KV, G·tc, hd] (the G heads of a kv head stacked) over
 * keys [B, KV, S, hd] (or [B, KV, hd, S] when `keysTransposed`) and values [B, KV, S, hd], with the bias
 * [B, 1, tc, S]: the context [B, H, tc, hd]. [B, KV, G·tc, S] is laid out as [B, H, tc, S], so the bias
 * broadcasts over heads in rank 4.
 */
export function attendChunk(qg: tf.Tensor, keys: tf.Tensor, keysTransposed: boolean, vv: tf.Tensor, bias: tf.Tensor, scale: number): tf.Tensor {
  const [B, KV, Gtc, hd] = qg.shape;
  const [, , tc, S] = bias.shape;
  const H = (KV * Gtc) / tc;
  const raw = keysTransposed ? tf.matMul(qg, keys) : tf.matMul(qg, keys, false, true);
  const scores = tf.add(tf.reshape(tf.mul(raw, scale), [B, H, tc, S]), bias);
  const probs = tf.reshape(tf.softmax(scores, -1), [B, KV, Gtc, S]);
  return tf.reshape(tf.matMul(probs, vv), [B, H, tc, hd]);
}

/** Kv head j of t [B, KV, R, C] as one 2-D matrix [B·R, C] (every row's slice of that head, stacked). */
function kvHead(t: tf.Tensor, j: number): tf.Tensor2D {
  const [, KV, , C] = t.shape;
  return tf.reshape(KV === 1 ? t : tf.slice(t, [0, j, 0, 0], [-1, 1, -1, -1]), [-1, C]) as tf.Tensor2D;
}

/**
 * Attention of queries qg [B, KV, G·tc, hd] over the shared prefix of layer `layer` followed by the rows' own
 * keys (ownK: [B, KV, hd, S] when `ownKT`, else [B, KV, S, hd]; bias [B, 1, tc, S] masks only the own part).
 * Returns the context [B, H, tc, hd]. The prefix is multiplied per kv head as one 2-D matrix for all rows
 * (batched matmuls are slow on some backends, and the prefix is never tiled), and the softmax over both parts
 * is taken with one running max and one denominator, so nothing is concatenated along the key axis.
 */
export function attendWithShared(
  qg: tf.Tensor,
  ownK: tf.Tensor4D,
  ownKT: boolean,
  ownV: tf.Tensor4D,
  bias: tf.Tensor,
  shared: SharedPrefix,
  layer: number,
  d: { B: number; H: number; KV: number; G: number; tc: number; hd: number; scale: number },
): tf.Tensor {
  const { B, H, KV, G, tc, hd, scale } = d;
  const S = ownK.shape[ownKT ? 3 : 2];
  // scaling the queries is cheaper than scaling both score matrices
  const qs = tf.mul(qg, scale);
  const rawOwn = ownKT ? tf.matMul(qs, ownK) : tf.matMul(qs, ownK, false, true);
  const own = tf.reshape(tf.add(tf.reshape(rawOwn, [B, H, tc, S]), bias), [B, KV, G * tc, S]);
  const ownMax = tf.max(own, -1, true);
  const maxes: tf.Tensor[] = [];
  const sums: tf.Tensor[] = [];
  const ctxs: tf.Tensor[] = [];
  for (let j = 0; j < KV; j++) {
    const q2 = kvHead(qs, j);
    const k2 = shared.keys[layer][j];
    const scores = shared.keysTransposed ? tf.matMul(q2, k2) : tf.matMul(q2, k2, false, true);
    const m = tf.maximum(tf.max(scores, 1, true), kvHead(ownMax, j));
    const e = tf.exp(tf.sub(scores, m));
    maxes.push(tf.reshape(m, [B, 1, G * tc, 1]));
    sums.push(tf.reshape(tf.sum(e, 1, true), [B, 1, G * tc, 1]));
    ctxs.push(tf.reshape(tf.matMul(e, shared.values[layer][j]), [B, 1, G * tc, hd]));
  }
  const stack = (ts: tf.Tensor[]): tf.Tensor => (ts.length === 1 ? ts[0] : tf.concat(ts, 1));
  const m = stack(maxes);
  const e = tf.exp(tf.sub(own, m));
  const denom = tf.add(stack(sums), tf.sum(e, -1, true));
  const ctx = tf.div(tf.add(stack(ctxs), tf.matMul(e, ownV)), denom);
  return tf.reshape(ctx, [B, H, tc, hd]);
}

/**
 * Attention of one row's queries qg [1, KV, G·tc, hd] over its keys kT [1, KV, hd, S] (transposed) and
 * values [1, KV, S, hd], with bias [1, 1, tc, S]; returns the context [1, H, tc, hd]. One 2-D matmul per kv
 * head, for backends where a matmul batched over the kv heads is several times slower (wasm).
 */
export function attendOneRow(
  qg: tf.Tensor,
  kT: tf.Tensor4D,
  vv: tf.Tensor4D,
  bias: tf.Tensor,
  d: { H: number; KV: number; G: number; tc: number; hd: number; scale: number },
): tf.Tensor {
  const { H, KV, G, tc, hd, scale } = d;
  const S = kT.shape[3];
  const bias3 = tf.reshape(bias, [1, tc, S]);
  const ctxs: tf.Tensor[] = [];
  for (let j = 0; j < KV; j++) {
    const raw = tf.matMul(kvHead(qg, j), kvHead(kT, j));
    const scores = tf.add(tf.reshape(tf.mul(raw, scale), [G, tc, S]), bias3);
    const probs = tf.reshape(tf.softmax(scores, -1), [G * tc, S]) as tf.Tensor2D;
    ctxs.push(tf.reshape(tf.matMul(probs, kvHead(vv, j)), [1, 1, G * tc, hd]));
  }
  return tf.reshape(ctxs.length === 1 ? ctxs[0] : tf.concat(ctxs, 1), [1, H, tc, hd]);
}
