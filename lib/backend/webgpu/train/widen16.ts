/**
 * 16-bit weights kept 16-bit on the GPU, widened where they are used. A bf16 or f16 weight lives as packed
 * words (lib/backend/webgpu/half.ts), and this kernel writes its float32 copy, one thread per element. The copy is a
 * temporary of the step that needs it: the frozen base under LoRA is widened layer by layer, so the model
 * itself stays at the checkpoint's size on the device.
 */
import { tf } from "../../tf.js";
import { elementwise, type WebGpuBackendLike } from "./program.js";
import { widenWgsl, type Half } from "../half.js";

export const WIDEN16 = "T2sWiden16";
/** float32 values rounded to bf16 (to nearest even) and packed two per word: the inverse of WIDEN16. */
export const NARROW_BF16 = "T2sNarrowBf16";
/** Rows of a packed matrix gathered and widened in one pass (tfjs's own gather is not bit-exact on int32). */
export const GATHER_WIDEN16 = "T2sGatherWiden16";

export type { Half };

let registered = false;

/** Registers the webgpu kernel (once). Its output is a constant of the step: it has no gradient. */
export function registerWiden16Kernel(): void {
  if (registered) return;
  registered = true;
  tf.registerKernel({
    kernelName: WIDEN16,
    backendName: "webgpu",
    kernelFunc: ({ inputs, attrs, backend }) => {
      const { words } = inputs as { words: tf.TensorInfo };
      const { dtype, shape } = attrs as unknown as { dtype: Half; shape: number[] };
      const body = `let w = bitcast<u32>(W[index / 2]);
          result[index] = ${widenWgsl(dtype, "w", "u32(index % 2)")};`;
      const program = elementwise(shape, `t2s_widen16_${dtype}`, ["W"], "", body);
      return (backend as unknown as WebGpuBackendLike).runWebGPUProgram(program, [words], "float32");
    },
  });
  tf.registerKernel({
    kernelName: NARROW_BF16,
    backendName: "webgpu",
    kernelFunc: ({ inputs, attrs, backend }) => {
      const { x } = inputs as { x: tf.TensorInfo };
      const { shape } = attrs as unknown as { shape: number[] };
      const body = `let lo = bitcast<u32>(X[2 * index]);
          let hi = bitcast<u32>(X[2 * index + 1]);
          let l = (lo + 0x7fffu + ((lo >> 16u) & 1u)) >> 16u;
          let h = (hi + 0x7fffu + ((hi >> 16u) & 1u)) >> 16u;
          result[index] = bitcast<i32>(l | (h << 16u));`;
      const program = elementwise(shape, "t2s_narrow_bf16", ["X"], "", body);
      return (backend as unknown as WebGpuBackendLike).runWebGPUProgram(program, [x], "int32");
    },
  });
  tf.registerKernel({
    kernelName: GATHER_WIDEN16,
    backendName: "webgpu",
    kernelFunc: ({ inputs, attrs, backend }) => {
      const { words, ids } = inputs as { words: tf.TensorInfo; ids: tf.TensorInfo };
      const { dtype, shape, cols } = attrs as unknown as { dtype: Half; shape: number[]; cols: number };
      const body = `let row = IDS[index / ${cols}];
          let e = row * ${cols} + index % ${cols};
          let w = bitcast<u32>(W[e / 2]);
          result[index] = ${widenWgsl(dtype, "w", "u32(e % 2)")};`;
      const program = elementwise(shape, `t2s_gather_widen16_${dtype}_${cols}`, ["W", "IDS"], "", body);
      return (backend as unknown as WebGpuBackendLike).runWebGPUProgram(program, [words, ids], "float32");
    },
  });
}

/** Rows `ids` (int32, any shape) of the packed [rows, cols] matrix in `words`, widened: [...ids.shape, cols]. */
export function gatherWiden16Webgpu(words: tf.Tensor, ids: tf.Tensor, dtype: Half, cols: number): tf.Tensor {
  const shape = [...ids.shape, cols];
  return tf.engine().runKernel(GATHER_WIDEN16, { words, ids }, { dtype, shape, cols } as unknown as tf.NamedAttrMap) as tf.Tensor;
}

/** A float32 [rows, cols] matrix as packed bf16 words [rows, cols / 2] (webgpu backend only; finite values). */
export function narrowBf16Webgpu(x: tf.Tensor): tf.Tensor {
  const shape = [...x.shape.slice(0, -1), x.shape[x.shape.length - 1] / 2];
  return tf.engine().runKernel(NARROW_BF16, { x }, { shape } as unknown as tf.NamedAttrMap) as tf.Tensor;
}

/** The float32 tensor of `shape` held by packed int32 `words` (webgpu backend only). */
export function widen16Webgpu(words: tf.Tensor, dtype: Half, shape: number[]): tf.Tensor {
  return tf.engine().runKernel(WIDEN16, { words }, { dtype, shape } as unknown as tf.NamedAttrMap) as tf.Tensor;
}
