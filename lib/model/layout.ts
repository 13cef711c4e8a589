/**
 * Weight layout per backend. Linear weights are stored as nn.Linear has them ([out, in]), so every layer
 * computes x·Wᵀ. The wasm backend runs a matmul with a transposed right operand about ten times slower
 * than a plain one (measured: 1.8 vs 20 GFLOP/s for [1024, 256] x [256, 704]), so there a frozen weight
 * keeps one transposed copy ([in, out]) beside it and the layer multiplies by that. Trainable weights
 * (tf.Variable) are transposed inside the step instead: their values change every update, and the
 * transpose is then part of the differentiated graph.
 */
import { tf } from "../backend/tf.js";

/** Backends whose matMul(a, b, false, true) is much slower than matMul(a, bᵀ). */
const PLAIN_MATMUL_BACKENDS = new Set(["wasm"]);

const transposed = new WeakMap<tf.Tensor, tf.Tensor2D>();

/** Whether the current backend wants right operands laid out [in, out] (no transposed matmul). */
export function prefersPlainMatMul(): boolean {
  return PLAIN_MATMUL_BACKENDS.has(tf.getBackend());
}

/** Returns wᵀ for a weight w [out, in]: a kept copy for frozen weights, a graph op for variables. */
export function transposedWeight(w: tf.Tensor2D): tf.Tensor2D {
  if (w instanceof tf.Variable) return tf.transpose(w);
  let t = transposed.get(w);
  if (!t || t.isDisposed) {
    t = tf.keep(tf.transpose(w));
    transposed.set(w, t);
  }
  return t;
}

/** x [N, in] times the weight w [out, in] transposed, in the backend's fastest layout. */
export function matMulWeightT(x: tf.Tensor2D, w: tf.Tensor2D): tf.Tensor2D {
  return prefersPlainMatMul() ? tf.matMul(x, transposedWeight(w)) : tf.matMul(x, w, false, true);
}

/** Releases the transposed copies made for these tensors (call when disposing them). */
export function releaseTransposed(tensors: Iterable<tf.Tensor>): void {
  for (const w of tensors) {
    const t = transposed.get(w);
    if (t && !t.isDisposed) t.dispose();
    transposed.delete(w);
  }
}
