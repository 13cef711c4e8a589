/**
 * Counts GPU dispatches on the WebGPU backend. tf.profile lists engine kernels, which is not the same
 * thing: Reshape and Identity are kernels that dispatch nothing, and some kernels (the fused optimizer's
 * in-place updates, the sum of squares over many tensors) dispatch without an engine kernel each.
 */
import { tf } from "../lib/backend/tf.js";

/** Runs `f` and returns its result with the number of compute dispatches recorded meanwhile (null off WebGPU). */
export async function countDispatches<T>(f: () => Promise<T>): Promise<{ result: T; dispatches: number | null }> {
  if (tf.getBackend() !== "webgpu") return { result: await f(), dispatches: null };
  const backend = tf.backend() as unknown as { recordAndSubmit: (...args: unknown[]) => unknown };
  const original = backend.recordAndSubmit;
  let dispatches = 0;
  backend.recordAndSubmit = function (this: unknown, ...args: unknown[]) {
    dispatches++;
    return original.apply(this, args);
  };
  try {
    return { result: await f(), dispatches };
  } finally {
    backend.recordAndSubmit = original;
  }
}
