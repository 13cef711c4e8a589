/**
 * A linear layer with an unmerged LoRA pair as one tfjs kernel on WebGPU: y = x·Wᵀ + s·(x·Aᵀ)·Bᵀ.
 *
 * Through tfjs ops that is three matrix products, a Multiply by s over [N, out] and an Add, and the backward
 * adds a Multiply and an Add more. Here the base product is written first and the LoRA product is added
 * onto it, scaled, by the same GEMM kernel (lib/backend/webgpu/train/batch-matmul.ts, C = s·A·B + C): three
 * dispatches forward. The backward: with u = x·Aᵀ recomputed (a [N, r] product, cheaper
 * than keeping it), g = s·dy·B, dB = s·dyᵀ·u, dA = gᵀ·x and dx = dy·W + g·A, the second term added in place.
 * The tape asks for each input's gradient in a scope of its own, so each is one call (g is computed for dx
 * and for dA): seven dispatches, against nine through tfjs ops. W's gradient (full training on top of an adapter)
 * is a plain matMul, asked for only when W is trained.
 *
 * lib/model/decoder.ts's `linear` uses it when the fused kernels are on (lib/backend/webgpu/train/fused.ts).
 */
import { tf } from "../../tf.js";
import { matMulInfo, runGemm, type GemmShape } from "./batch-matmul.js";
import { viewAs, webgpuBackend } from "./program.js";

export const LORA_LINEAR = "T2sLoraLinear";
export const LORA_LINEAR_GRAD = "T2sLoraLinearGrad";

/** The shape of C = op(A)·op(B) for 2-D operands (M x K times K x N). */
function gemm2d(M: number, N: number, K: number, transposeA: boolean, transposeB: boolean): GemmShape {
  return { batch: 1, M, N, K, transposeA, transposeB, aBroadcast: false, bBroadcast: false };
}

type Inputs = { x: tf.TensorInfo; w: tf.TensorInfo; a: tf.TensorInfo; b: tf.TensorInfo };

let registered = false;

/** Registers the kernels (webgpu) and the gradient, once (register.ts calls it). */
export function registerLoraLinearKernels(): void {
  if (registered) return;
  registered = true;
  tf.registerKernel({
    kernelName: LORA_LINEAR,
    backendName: "webgpu",
    kernelFunc: ({ inputs, attrs }) => {
      const { x, w, a, b } = inputs as unknown as Inputs;
      const scale = (attrs as { scale: number }).scale;
      const [N, inDim] = x.shape;
      const out = w.shape[0];
      const r = a.shape[0];
      const gpu = webgpuBackend();
      // plain products go where BatchMatMul would run them (skinny ones, [N, r], to tfjs's kernel)
      const u = matMulInfo(x, a, false, true);
      const y = runGemm(x, w, gemm2d(N, out, inDim, false, true));
      runGemm(u, b, gemm2d(N, out, r, false, true), { alpha: scale, accumulate: true }, y);
      gpu.disposeData(u.dataId);
      return viewAs(y, [N, out]);
    },
  });
  tf.registerKernel({
    kernelName: LORA_LINEAR_GRAD,
    backendName: "webgpu",
    kernelFunc: ({ inputs, attrs }) => {
      const { dy, x, w, a, b } = inputs as unknown as Inputs & { dy: tf.TensorInfo };
      const { scale, which } = attrs as { scale: number; which: "x" | "a" | "b" };
      const [N, inDim] = x.shape;
      const out = w.shape[0];
      const r = a.shape[0];
      const gpu = webgpuBackend();
      if (which === "b") {
        const u = matMulInfo(x, a, false, true);
        const dB = runGemm(dy, u, gemm2d(out, r, N, true, false), { alpha: scale, accumulate: false });
        gpu.disposeData(u.dataId);
        return viewAs(dB, [out, r]);
      }
      const g = viewAs(runGemm(dy, b, gemm2d(N, r, out, false, false), { alpha: scale, accumulate: false }), [N, r]);
      let grad: tf.TensorInfo;
      if (which === "a") grad = matMulInfo(g, x, true, false);
      else {
        const dx = runGemm(dy, w, gemm2d(N, inDim, out, false, false));
        grad = viewAs(runGemm(g, a, gemm2d(N, inDim, r, false, false), { alpha: 1, accumulate: true }, dx), [N, inDim]);
      }
      gpu.disposeData(g.dataId);
      return grad;
    },
  });
  tf.registerGradient({
    kernelName: LORA_LINEAR,
    inputsToSave: ["x", "w", "a", "b"],
    gradFunc: (dy, saved, attrs) => {
      const [x, w, a, b] = saved;
      const scale = (attrs as { scale: number }).scale;
      // each input's gradient is its own call: the tape runs every one in a scope that frees what it does
      // not return, so one kernel returning all three could not hand them out one by one
      const grad = (which: "x" | "a" | "b") => () => tf.engine().runKernel(LORA_LINEAR_GRAD, { dy: dy as tf.Tensor, x, w, a, b }, { scale, which }) as tf.Tensor;
      return { x: grad("x"), a: grad("a"), b: grad("b"), w: () => tf.matMul(dy as tf.Tensor, x, true, false) };
    },
  });
}

/** y [N, out] = x [N, in] · wᵀ + scale · (x · aᵀ) · bᵀ for w [out, in], a [r, in], b [out, r] (webgpu only). */
export function loraLinearFused(x: tf.Tensor2D, w: tf.Tensor2D, a: tf.Tensor2D, b: tf.Tensor2D, scale: number): tf.Tensor2D {
  return tf.engine().runKernel(LORA_LINEAR, { x, w, a, b }, { scale }) as tf.Tensor2D;
}
