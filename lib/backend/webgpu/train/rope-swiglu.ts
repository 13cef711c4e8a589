/**
 * Fused rotary embedding and SwiGLU for the WebGPU backend, forward and backward, as tfjs kernels with
 * registered gradients. Both are elementwise, so each direction is one dispatch per output:
 *
 * - RoPE, half-split layout: out = x · cos + rotate_half(x) · sin with rotate_half(x) = [-x2, x1], for x
 *   [..., heads, hd] and cos/sin [..., 1, hd] (one row per token, broadcast over the heads). The ops path is
 *   a matmul by the signed permutation, two muls and an add forward, and as many again backward. The
 *   backward is dx = dy · cos + rotate_half^T(dy · sin) with rotate_half^T(y) = [y2, -y1]; cos and sin are
 *   constants built on the CPU, their gradient is zero.
 * - SwiGLU: act = silu(gate) · up (sigmoid and two muls with tfjs ops); backward dgate = dy · up · s ·
 *   (1 + gate · (1 - s)) with s = sigmoid(gate) and dup = dy · silu(gate), one dispatch each.
 *
 * lib/model/decoder.ts calls `ropeFused` and `swigluFused` when fusedKernelsActive()
 * (lib/backend/webgpu/train/fused.ts); RMSNorm is in layer-kernels.ts.
 */
import { tf } from "../../tf.js";
import { elementwise, type Uniform, type WebGpuBackendLike } from "./program.js";

export const ROPE = "T2sRope";
export const ROPE_GRAD = "T2sRopeGrad";
export const SWIGLU = "T2sSwiGlu";
export const SWIGLU_GRAD_GATE = "T2sSwiGluGradGate";
export const SWIGLU_GRAD_UP = "T2sSwiGluGradUp";

const i32 = (x: number): Uniform => ({ type: "int32", data: [x] });

/**
 * Where element `index` of x [..., heads, hd] finds its angle: `j` its place in the head, `c` the same
 * place in the token's cos/sin row, `half` the distance to its rotation partner.
 */
const ROPE_INDEX = `
          let hd = uniforms.hd;
          let half = hd / 2;
          let j = index % hd;
          let c = (index / (hd * uniforms.heads)) * hd + j;
          let low = j < half;
          // rotate_half pairs element j with j + half (first half) or j - half (second half)
          let p = select(index - half, index + half, low);
          let pc = select(c - half, c + half, low);`;

/** out = x · cos + rotate_half(x) · sin. Inputs X, C (cos), S (sin). */
function ropeProgram(shape: number[], backward: boolean) {
  const body = backward
    ? // rotate_half^T(dy · sin) = [(dy · sin)2, -(dy · sin)1]
      `${ROPE_INDEX}
          let turned = select(-1.0, 1.0, low) * X[p] * S[pc];
          result[index] = X[index] * C[c] + turned;`
    : `${ROPE_INDEX}
          let turned = select(1.0, -1.0, low) * X[p];
          result[index] = X[index] * C[c] + turned * S[c];`;
  return elementwise(shape, `t2s_rope_${backward ? "bwd" : "fwd"}`, ["X", "C", "S"], "heads : i32, hd : i32,", body);
}

/** The WGSL sigmoid tfjs uses (1 / (1 + exp(-g))), so both paths round alike. */
const SIGMOID = "let s = 1.0 / (1.0 + exp(-g));";

function swigluProgram(shape: number[]) {
  return elementwise(shape, "t2s_swiglu_fwd", ["G", "U"], "", `
          let g = G[index];
          ${SIGMOID}
          result[index] = g * s * U[index];`);
}

/**
 * dgate or dup. Every bound input must be read (an unread binding leaves the pipeline's layout and the
 * dispatch is rejected), so dup binds gate and dy only.
 */
function swigluGradProgram(shape: number[], part: "gate" | "up") {
  const value = part === "gate" ? "DY[index] * U[index] * s * (1.0 + g * (1.0 - s))" : "DY[index] * g * s";
  return elementwise(shape, `t2s_swiglu_d${part}`, part === "gate" ? ["G", "U", "DY"] : ["G", "DY"], "", `
          let g = G[index];
          ${SIGMOID}
          result[index] = ${value};`);
}

function checkRope(x: tf.TensorInfo, cos: tf.TensorInfo, sin: tf.TensorInfo): void {
  const r = x.shape.length;
  const hd = x.shape[r - 1];
  const rows = r >= 2 ? tf.util.sizeFromShape(x.shape.slice(0, -2)) : 0;
  const table = rows * hd;
  if (r < 2 || hd % 2 !== 0 || tf.util.sizeFromShape(cos.shape) !== table || tf.util.sizeFromShape(sin.shape) !== table || cos.shape[cos.shape.length - 1] !== hd) {
    throw new Error(`ropeFused: x [${x.shape}] needs [..., heads, hd] with hd even and cos/sin [..., 1, hd] (got [${cos.shape}], [${sin.shape}])`);
  }
  if (x.dtype !== "float32" || cos.dtype !== "float32" || sin.dtype !== "float32") throw new Error("ropeFused: float32 only");
}

function checkSwiglu(gate: tf.TensorInfo, up: tf.TensorInfo): void {
  if (!tf.util.arraysEqual(gate.shape, up.shape)) throw new Error(`swigluFused: gate [${gate.shape}] and up [${up.shape}] differ`);
  if (gate.dtype !== "float32" || up.dtype !== "float32") throw new Error("swigluFused: float32 only");
}

let registered = false;

/** Registers the rotary and SwiGLU kernels for webgpu and their gradients (once). */
export function registerRopeSwigluKernels(): void {
  if (registered) return;
  registered = true;
  const gpuOf = (backend: unknown) => backend as WebGpuBackendLike;
  const rope = (backward: boolean) => ({ inputs, backend }: { inputs: tf.NamedTensorInfoMap; backend: unknown }) => {
    const { x, cos, sin } = inputs as { x: tf.TensorInfo; cos: tf.TensorInfo; sin: tf.TensorInfo };
    checkRope(x, cos, sin);
    const r = x.shape.length;
    return gpuOf(backend).runWebGPUProgram(ropeProgram(x.shape, backward), [x, cos, sin], "float32", [i32(x.shape[r - 2]), i32(x.shape[r - 1])]);
  };
  tf.registerKernel({ kernelName: ROPE, backendName: "webgpu", kernelFunc: rope(false) as tf.KernelFunc });
  // the backward is the same program on dy with the rotation transposed; its input is named x as well
  tf.registerKernel({ kernelName: ROPE_GRAD, backendName: "webgpu", kernelFunc: rope(true) as tf.KernelFunc });
  tf.registerGradient({
    kernelName: ROPE,
    inputsToSave: ["cos", "sin"],
    gradFunc: (dy, [cos, sin]) => ({
      x: () => tf.engine().runKernel(ROPE_GRAD, { x: dy as tf.Tensor, cos, sin }) as tf.Tensor,
      cos: () => tf.zerosLike(cos),
      sin: () => tf.zerosLike(sin),
    }),
  });
  tf.registerKernel({
    kernelName: SWIGLU,
    backendName: "webgpu",
    kernelFunc: ({ inputs, backend }) => {
      const { gate, up } = inputs as { gate: tf.TensorInfo; up: tf.TensorInfo };
      checkSwiglu(gate, up);
      return gpuOf(backend).runWebGPUProgram(swigluProgram(gate.shape), [gate, up], "float32");
    },
  });
  for (const [name, part] of [[SWIGLU_GRAD_GATE, "gate"], [SWIGLU_GRAD_UP, "up"]] as const) {
    tf.registerKernel({
      kernelName: name,
      backendName: "webgpu",
      kernelFunc: ({ inputs, backend }) => {
        const { gate, up, dy } = inputs as { gate: tf.TensorInfo; up: tf.TensorInfo; dy: tf.TensorInfo };
        return gpuOf(backend).runWebGPUProgram(swigluGradProgram(gate.shape, part), part === "gate" ? [gate, up, dy] : [gate, dy], "float32");
      },
    });
  }
  tf.registerGradient({
    kernelName: SWIGLU,
    inputsToSave: ["gate", "up"],
    gradFunc: (dy, [gate, up]) => ({
      gate: () => tf.engine().runKernel(SWIGLU_GRAD_GATE, { gate, up, dy: dy as tf.Tensor }) as tf.Tensor,
      up: () => tf.engine().runKernel(SWIGLU_GRAD_UP, { gate, dy: dy as tf.Tensor }) as tf.Tensor,
    }),
  });
}

/** Half-split rotary embedding of x [..., heads, hd] with cos/sin [..., 1, hd] on WebGPU (one dispatch each way). */
export function ropeFused(x: tf.Tensor, cos: tf.Tensor, sin: tf.Tensor): tf.Tensor {
  return tf.engine().runKernel(ROPE, { x, cos, sin }) as tf.Tensor;
}

/** silu(gate) · up on WebGPU (one dispatch forward, two backward). */
export function swigluFused(gate: tf.Tensor, up: tf.Tensor): tf.Tensor {
  return tf.engine().runKernel(SWIGLU, { gate, up }) as tf.Tensor;
}
