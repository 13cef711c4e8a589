/**
 * What the fused-kernel tests share: starting the webgpu backend (or the reason to skip when there is no
 * adapter; Mesa's software driver gives one without a GPU) and the relative error they compare by.
 */
import assert from "node:assert/strict";
import { useBackend } from "../../lib/backend/select.js";
import { tf } from "../../lib/backend/tf.js";
import { ensureGradients } from "../../lib/backend/gradients.js";

/**
 * Makes webgpu the backend and registers the gradients; returns null, or why the tests skip. With
 * `gpuOnly`, tfjs runs small tensors' kernels on the GPU too, so the ops path compared against is the GPU's.
 */
export async function startWebgpu(opts: { gpuOnly?: boolean } = {}): Promise<string | null> {
  ensureGradients();
  try {
    await useBackend("webgpu");
  } catch (e) {
    return `no WebGPU adapter: ${(e as Error).message}`;
  }
  if (opts.gpuOnly) tf.env().set("WEBGPU_CPU_FORWARD", false);
  return null;
}

/** Largest |a - b| over the largest |b| (the difference itself when b is all zero); a must be finite. */
export function relErr(a: Float32Array, b: Float32Array): number {
  assert.equal(a.length, b.length);
  let diff = 0;
  let scale = 0;
  for (let i = 0; i < b.length; i++) {
    assert.ok(Number.isFinite(a[i]), `non-finite value at ${i}`);
    diff = Math.max(diff, Math.abs(a[i] - b[i]));
    scale = Math.max(scale, Math.abs(b[i]));
  }
  return scale === 0 ? diff : diff / scale;
}
