/**
 * Weight matrices stored at 16 bits. A bf16 or f16 checkpoint's linear weights, embeddings and head can
 * stay 16-bit on the device (`weights_dtype`): two values packed per 32-bit word, as the checkpoint stores
 * them, widened inside the kernels that read them, with float32 arithmetic. The WebGPU step runner reads
 * the words directly (lib/backend/webgpu/step/gemm.ts); tfjs-op code (training, the CPU runner) asks for a
 * float32 copy with `dense`, made per use and freed with the step's scope. Full-weight training keeps
 * float32 master weights: a packed matrix is never a variable.
 */
import { tf } from "../backend/tf.js";
import { T2sError } from "../core/errors.js";
import { gatherWiden16Webgpu, narrowBf16Webgpu, widen16Webgpu, type Half } from "../backend/webgpu/train/widen16.js";
import { halfToFloatTable, toBf16Bits, type RawTensor } from "./safetensors.js";

export type { Half };

export type { WeightsDtype } from "./weights-dtype.js";

/** A [rows, cols] matrix of 16-bit values held as int32 words [rows, cols / 2]. */
export class PackedWeight {
  constructor(readonly words: tf.Tensor2D, readonly shape: [number, number], readonly dtype: Half) {}

  /** Bytes on the device. */
  get bytes(): number {
    return this.shape[0] * this.shape[1] * 2;
  }

  dispose(): void {
    this.words.dispose();
  }
}

/** A weight matrix as the decoder holds it: float32, or packed 16-bit. */
export type WeightMatrix = tf.Tensor2D | PackedWeight;

export function isPacked(w: WeightMatrix): w is PackedWeight {
  return w instanceof PackedWeight;
}

/** The tensor that holds a weight matrix's storage (its words when packed): for disposal, buffers, counting. */
export function storage(w: WeightMatrix): tf.Tensor {
  return isPacked(w) ? w.words : w;
}

/** [rows, cols] of a weight matrix, whatever its storage. */
export function weightShape(w: WeightMatrix): [number, number] {
  return [w.shape[0], w.shape[1]];
}

/** Host-side widening (CPU and wasm backends, tests): the words read back and decoded. */
function widenOnHost(words: Int32Array, dtype: Half, shape: number[]): tf.Tensor {
  const out = new Float32Array(words.length * 2);
  if (dtype === "bf16") {
    const bits = new Uint32Array(out.buffer);
    for (let j = 0; j < words.length; j++) {
      const w = words[j] >>> 0;
      bits[2 * j] = (w & 0xffff) << 16;
      bits[2 * j + 1] = w & 0xffff0000;
    }
  } else {
    const table = halfToFloatTable();
    for (let j = 0; j < words.length; j++) {
      const w = words[j] >>> 0;
      out[2 * j] = table[w & 0xffff];
      out[2 * j + 1] = table[w >>> 16];
    }
  }
  return tf.tensor(out, shape);
}

/** Widens packed words of any shape (the last axis counted in values, not words). */
function widenWords(words: tf.Tensor, dtype: Half, shape: number[]): tf.Tensor {
  if (tf.getBackend() === "webgpu") return widen16Webgpu(words, dtype, shape);
  return widenOnHost(words.dataSync() as Int32Array, dtype, shape);
}

/**
 * The float32 matrix of `w`: `w` itself when it is float32, else a widened copy owned by the caller's
 * scope (call inside tf.tidy).
 */
export function dense(w: WeightMatrix): tf.Tensor2D {
  return isPacked(w) ? (widenWords(w.words, w.dtype, w.shape) as tf.Tensor2D) : w;
}

/** Rows `ids` of a weight matrix (an embedding lookup) as float32: only the rows gathered are widened. */
export function gatherRows(w: WeightMatrix, ids: tf.Tensor): tf.Tensor {
  if (!isPacked(w)) return tf.gather(w, ids);
  if (tf.getBackend() === "webgpu") return gatherWiden16Webgpu(w.words, ids, w.dtype, w.shape[1]);
  return widenWords(tf.gather(w.words, ids), w.dtype, [...ids.shape, w.shape[1]]);
}

/** A float32 matrix on the device as a packed bf16 one (rounded to nearest even); `w` is disposed. */
export function packDense(w: tf.Tensor2D): PackedWeight {
  const [rows, cols] = w.shape;
  if (cols % 2 !== 0) throw new T2sError("bad_tensor", `a [${rows}, ${cols}] matrix cannot be stored packed (an even number of columns is needed)`);
  const words = tf.getBackend() === "webgpu"
    ? (narrowBf16Webgpu(w) as tf.Tensor2D)
    : tf.tensor2d(new Int32Array(toBf16Bits(w.dataSync() as Float32Array).buffer), [rows, cols / 2], "int32");
  w.dispose();
  return new PackedWeight(words, [rows, cols], "bf16");
}

/**
 * Packs a checkpoint tensor for 16-bit storage: a BF16 or F16 tensor keeps its own bytes (no copy, no
 * rounding); an F32 one is rounded to bf16. Returns the dtype chosen and the words.
 */
export function packRaw(raw: RawTensor, name: string): { dtype: Half; words: Int32Array } {
  const count = raw.shape.reduce((a, b) => a * b, 1);
  if (raw.shape.length !== 2 || raw.shape[1] % 2 !== 0) throw new T2sError("bad_checkpoint", `tensor ${name} of shape [${raw.shape}] cannot be stored packed (16-bit storage needs a matrix with an even number of columns)`);
  if (raw.dtype === "F32") {
    const f = new Float32Array(raw.bytes.buffer, raw.bytes.byteOffset, count);
    const h = toBf16Bits(f);
    return { dtype: "bf16", words: new Int32Array(h.buffer) };
  }
  return { dtype: raw.dtype === "BF16" ? "bf16" : "f16", words: new Int32Array(raw.bytes.buffer, raw.bytes.byteOffset, count / 2) };
}

/** A device-resident packed matrix from a checkpoint tensor. */
export function packedFromRaw(raw: RawTensor, name: string): PackedWeight {
  const { dtype, words } = packRaw(raw, name);
  const [rows, cols] = raw.shape;
  return new PackedWeight(tf.tensor2d(words, [rows, cols / 2], "int32"), [rows, cols], dtype);
}
