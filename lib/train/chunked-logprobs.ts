/**
 * Log-probabilities of target tokens from the final hidden states, projected onto the vocabulary a chunk of
 * positions at a time. With a real vocabulary the learner's logits are the largest tensors of an update
 * (128 rows x 128 scored positions x 151,936 x 4 B = 10 GB, and as much again for their gradient); here
 * each chunk's logits live only inside its own forward, and its backward computes them again
 * (lib/model/recompute.ts), so the tape keeps the hidden states and one chunk's logits exist at a time.
 * Values and gradients are those of projecting everything at once (test/train/chunked-logprobs.test.ts).
 * A 16-bit head is widened for each product (in vocabulary blocks when it is large), never kept.
 */
import { tf } from "../backend/tf.js";
import { matMulWeightT } from "../model/layout.js";
import { dense, gatherRows, isPacked, type WeightMatrix } from "../model/packed.js";
import { MAX_TENSOR_ELEMENTS } from "../core/defaults.js";
import { recomputedInBackward } from "../model/recompute.js";
import { targetLogprobs, type TokenLogprobs } from "./target-logprobs.js";

/**
 * h [n, D] times headᵀ: [n, V]. A 16-bit head is widened a block of vocabulary rows at a time (at most
 * MAX_TENSOR_ELEMENTS values each): a real vocabulary's whole float32 head (151,936 x 3,584 x 4 B = 2.2 GB
 * at 7B) is more than WebGPU can bind in one buffer, and more than the chunk's product needs at once.
 */
function headProduct(h: tf.Tensor2D, head: WeightMatrix, blockValues: number): tf.Tensor2D {
  if (!isPacked(head)) return matMulWeightT(h, head);
  const [V, D] = head.shape;
  const block = Math.max(1, Math.floor(blockValues / D));
  if (block >= V) return matMulWeightT(h, dense(head));
  const parts: tf.Tensor2D[] = [];
  for (let v0 = 0; v0 < V; v0 += block) {
    const rows = tf.range(v0, Math.min(V, v0 + block), 1, "int32");
    parts.push(matMulWeightT(h, gatherRows(head, rows) as tf.Tensor2D));
  }
  return tf.concat(parts, 1);
}

/**
 * logp [B, S] (and the entropies, no gradient) of `targets` (B rows of S ids) under softmax(hidden · headᵀ /
 * temperature), for hidden [B, S, D] and head [V, D] (float32 or 16-bit), `chunk` positions per projection.
 * A head that is a trainable variable (full-weight training) gets its gradient; a frozen one is read only.
 * `headBlockValues`: the most values of a 16-bit head widened at once.
 */
export function chunkedTargetLogprobs(hidden: tf.Tensor3D, head: WeightMatrix, targets: number[][], chunk: number, temperature = 1, withEntropy = false, headBlockValues = MAX_TENSOR_ELEMENTS): TokenLogprobs {
  const [B, S, D] = hidden.shape;
  const n = B * S;
  const size = Math.max(1, Math.min(chunk, n));
  const flatTargets = targets.flat();
  if (flatTargets.length !== n) throw new Error(`chunkedTargetLogprobs needs ${n} targets, got ${flatTargets.length}`);
  const params = !isPacked(head) && head instanceof tf.Variable && head.trainable ? [head] : [];
  const sizes: number[] = [];
  for (let p0 = 0; p0 < n; p0 += size) sizes.push(Math.min(size, n - p0));
  // the positions of a chunk carry the logits' rows: [positions, D] · [V, D]ᵀ, then the log-prob kernel
  const project = (h: tf.Tensor, tgt: tf.Tensor): tf.Tensor => {
    const m = h.shape[0];
    const logits = tf.reshape(headProduct(h as tf.Tensor2D, head, headBlockValues), [1, m, -1]) as tf.Tensor3D;
    const r = targetLogprobs(logits, tgt as tf.Tensor2D, temperature, withEntropy);
    if (!r.entropy) return r.logp;
    // a custom gradient has one output: the entropy rides beside logp (it carries no gradient)
    const both = tf.concat([r.logp, r.entropy], 0);
    r.entropy.dispose();
    return both;
  };
  // positions that fit one chunk are projected as they are, the logits kept on the tape (one chunk's worth
  // either way): computing them again in the backward would only cost time
  if (sizes.length === 1) {
    return tf.tidy(() => {
      const logits = tf.reshape(headProduct(tf.reshape(hidden, [n, D]) as tf.Tensor2D, head, headBlockValues), [B, S, -1]) as tf.Tensor3D;
      const r = targetLogprobs(logits, tf.tensor2d(targets, [B, S], "int32"), temperature, withEntropy);
      return r.entropy ? { logp: r.logp, entropy: r.entropy } : { logp: r.logp };
    });
  }
  return tf.tidy(() => {
    const flat = tf.reshape(hidden, [n, D]);
    // split, not slices: its gradient is one concat, where each slice's would be a zero-padded [n, D]
    const pieces = tf.split(flat, sizes, 0);
    let at = 0;
    const parts = pieces.map((h, i) => {
      const tgt = tf.tensor2d(flatTargets.slice(at, at + sizes[i]), [1, sizes[i]], "int32");
      at += sizes[i];
      return recomputedInBackward((ins, k) => project(ins[0], k.targets), [h], { targets: tgt }, params);
    });
    const out = tf.concat(parts, 1);
    const logp = tf.reshape(withEntropy ? tf.slice(out, [0, 0], [1, n]) : out, [B, S]) as tf.Tensor2D;
    // kept, as targetLogprobs keeps it: callers read it outside the scope that made the log-probs
    return withEntropy ? { logp, entropy: tf.keep(tf.reshape(tf.slice(out, [1, 0], [1, n]), [B, S]) as tf.Tensor2D) } : { logp };
  });
}
