/**
 * The fused RMSNorm, RoPE, SwiGLU and LoRA-linear kernels (lib/backend/webgpu/train/layer-kernels.ts, rope-swiglu.ts,
 * lora-linear.ts) against
 * the tfjs ops path of lib/model/decoder.ts: values, the gradients of every differentiable input, the time
 * of forward + backward, and (in the note) the dispatches each path records for one call, fused vs ops.
 *   npx tsx bench/kernels.ts --only layers [--qwen05b]
 */
import { tf } from "../../lib/backend/tf.js";
import { ensureGradients } from "../../lib/backend/gradients.js";
import { useFusedKernels } from "../../lib/backend/webgpu/train/fused.js";
import { linear, rmsNorm, rotate, rotateHalfMatrix, swiglu } from "../../lib/model/decoder.js";
import { inverseFrequencies, rotaryTables } from "../../lib/model/rope.js";
import { countDispatches } from "../dispatches.js";
import { bothPaths, relativeError, timePath, type KernelCheck } from "./check.js";

interface Case {
  kernel: string;
  shape: number[];
  /** The op on its inputs; `wrt` numbers the inputs that get gradients. */
  op: (...xs: tf.Tensor[]) => tf.Tensor;
  inputs: () => tf.Tensor[];
  wrt: number[];
  /** The output's shape when it is not the first input's. */
  outShape?: number[];
}

const EPS = 1e-6;
const normal = (shape: number[], seed: number, mean = 0, std = 1) => tf.randomNormal(shape, mean, std, "float32", seed);

function rmsNormCase(shape: number[]): Case {
  const D = shape[shape.length - 1];
  return { kernel: "rmsnorm fwd+bwd", shape, op: (x, w) => rmsNorm(x, w as tf.Tensor1D, EPS), inputs: () => [normal(shape, 1), normal([D], 2, 1, 0.1)], wrt: [0, 1] };
}

function ropeCase(shape: number[]): Case {
  const [B, T, , hd] = shape;
  const positions = Array.from({ length: B * T }, (_, i) => i % T);
  const { cos, sin } = rotaryTables(positions, inverseFrequencies(hd, 1000000, { type: "default" }));
  return {
    kernel: "rope fwd+bwd",
    shape,
    op: (x, c, s) => tf.tidy(() => rotate(x, c, s, rotateHalfMatrix(hd))),
    inputs: () => [normal(shape, 3), tf.tensor(cos, [B, T, 1, hd]), tf.tensor(sin, [B, T, 1, hd])],
    wrt: [0],
  };
}

function swigluCase(shape: number[]): Case {
  return { kernel: "swiglu fwd+bwd", shape, op: swiglu, inputs: () => [normal(shape, 4, 0, 2), normal(shape, 5)], wrt: [0, 1] };
}

/** A linear layer [N, in] -> [N, out] with a rank-r LoRA pair (frozen W; x, A and B get gradients). */
function loraCase(N: number, inDim: number, out: number, r: number): Case {
  return {
    kernel: "lora linear fwd+bwd",
    shape: [N, inDim],
    outShape: [N, out],
    op: (x, w, a, b) => linear(x, { weight: w as tf.Tensor2D, lora: new Map([["t", { a: a as tf.Tensor2D, b: b as tf.Tensor2D, scale: 2 }]]) }, "t"),
    inputs: () => [normal([N, inDim], 6), normal([out, inDim], 7, 0, 0.05), normal([r, inDim], 8, 0, 0.05), normal([out, r], 10, 0, 0.05)],
    wrt: [0, 2, 3],
  };
}

/** The op's output and the gradients of its differentiable inputs for the cotangent dy. */
function forwardBackward(c: Case, xs: tf.Tensor[], dy: tf.Tensor): tf.Tensor[] {
  const f = (...ws: tf.Tensor[]) => c.op(...xs.map((x, i) => (c.wrt.includes(i) ? ws[c.wrt.indexOf(i)] : x)));
  const { value, grads } = tf.valueAndGrads(f)(c.wrt.map((i) => xs[i]), dy);
  return [value, ...grads];
}

async function dispatchesOf(fused: boolean, f: () => tf.Tensor[]): Promise<number> {
  useFusedKernels(fused);
  try {
    f().forEach((t) => t.dispose()); // compile first
    const { result, dispatches } = await countDispatches(async () => f());
    tf.dispose(result);
    return dispatches ?? 0;
  } finally {
    useFusedKernels(true);
  }
}

async function check(c: Case): Promise<KernelCheck> {
  const xs = c.inputs();
  const dy = normal(c.outShape ?? c.shape, 9);
  const run = () => forwardBackward(c, xs, dy);
  const { fused, ops } = bothPaths(run);
  const value_err = await relativeError(fused[0], ops[0]);
  let grad_err = 0;
  for (let i = 1; i < fused.length; i++) grad_err = Math.max(grad_err, await relativeError(fused[i], ops[i]));
  tf.dispose([...fused, ...ops]);
  const counts = [await dispatchesOf(true, () => [c.op(...xs)]), await dispatchesOf(false, () => [c.op(...xs)]), await dispatchesOf(true, run), await dispatchesOf(false, run)];
  const fused_ms = await timePath(true, run);
  const ops_ms = await timePath(false, run);
  tf.dispose([...xs, dy]);
  const note = `dispatches fwd ${counts[0]} vs ${counts[1]}, fwd+bwd ${counts[2]} vs ${counts[3]}`;
  return { kernel: c.kernel, shape: [...c.shape, ...(c.outShape ? [c.outShape[c.outShape.length - 1]] : [])].join("x"), value_err, grad_err, fused_ms, ops_ms, note };
}

/** Checks at Qwen2-0.5B shapes (B4 x T512: 2,048 tokens, hidden 896, 14/2 heads of 64, intermediate 4,864) or small ones. */
export async function checks(big: boolean): Promise<KernelCheck[]> {
  ensureGradients();
  const cases = big
    ? [rmsNormCase([2048, 896]), rmsNormCase([4, 512, 14, 64]), ropeCase([4, 512, 14, 64]), ropeCase([4, 512, 2, 64]), swigluCase([2048, 4864]), loraCase(2048, 896, 896, 16), loraCase(2048, 896, 4864, 16), loraCase(2048, 4864, 896, 16)]
    : [rmsNormCase([64, 200]), rmsNormCase([2, 16, 4, 32]), ropeCase([2, 16, 4, 32]), ropeCase([2, 16, 2, 32]), swigluCase([64, 344]), loraCase(130, 96, 200, 4)];
  const out: KernelCheck[] = [];
  for (const c of cases) out.push(await check(c));
  return out;
}
