/**
 * What one fused-kernel check reports (bench/kernels.ts prints them): the fused kernel against the tfjs ops
 * path on the same inputs, for values and gradients, and the time of each.
 */
import { tf } from "../../lib/backend/tf.js";
import { useFusedKernels } from "../../lib/backend/webgpu/train/fused.js";

export interface KernelCheck {
  /** Kernel (and direction) checked, e.g. "rmsnorm fwd+bwd". */
  kernel: string;
  /** The shape it ran at, in words ("4x512x896"). */
  shape: string;
  /** Largest |fused - ops| of the outputs, relative to the largest |ops| output. */
  value_err: number;
  /** Same for the gradients of every input (NaN when the check has none). */
  grad_err: number;
  /** Milliseconds per call (forward and backward as the check runs them), each path. */
  fused_ms: number;
  ops_ms: number;
  /** Anything else worth a column (e.g. TFLOP/s of each path). */
  note?: string;
}

/** Waits until the GPU has run everything queued, reading back one value (not the whole tensor). */
export async function settle(t: tf.Tensor): Promise<void> {
  const one = tf.slice(tf.reshape(t, [-1]), [0], [1]);
  await one.data();
  one.dispose();
}

/** Largest |a - b| over the largest |b| (0 when both are all zero). */
export async function relativeError(a: tf.Tensor, b: tf.Tensor): Promise<number> {
  const [x, y] = [await a.data(), await b.data()];
  let diff = 0;
  let scale = 0;
  for (let i = 0; i < y.length; i++) {
    diff = Math.max(diff, Math.abs(x[i] - y[i]));
    scale = Math.max(scale, Math.abs(y[i]));
  }
  return scale === 0 ? diff : diff / scale;
}

/**
 * Milliseconds per call of `f` (which returns tensors) with the fused kernels on or off: `reps` calls back to
 * back, the GPU waited for once at the end (settle), so the figure is throughput, not a read-back per call.
 * A first batch compiles the pipelines and allocates the buffers later batches reuse (new WebGPU buffers
 * are zeroed, which would otherwise count against whichever path runs first); the best of two more
 * batches is returned, since the host's speed wanders between batches.
 */
export async function timePath(fused: boolean, f: () => tf.Tensor[], reps = 5): Promise<number> {
  useFusedKernels(fused);
  const batch = async (): Promise<number> => {
    const t0 = performance.now();
    const outs: tf.Tensor[][] = [];
    for (let i = 0; i < reps; i++) outs.push(f());
    await settle(outs[outs.length - 1][0]);
    const ms = (performance.now() - t0) / reps;
    for (const o of outs) tf.dispose(o);
    return ms;
  };
  try {
    await batch();
    return Math.min(await batch(), await batch());
  } finally {
    useFusedKernels(true);
  }
}

/** Both paths' outputs of `f`, fused first; the caller disposes them. */
export function bothPaths(f: () => tf.Tensor[]): { fused: tf.Tensor[]; ops: tf.Tensor[] } {
  try {
    useFusedKernels(true);
    const fused = f();
    useFusedKernels(false);
    const ops = f();
    return { fused, ops };
  } finally {
    useFusedKernels(true);
  }
}
