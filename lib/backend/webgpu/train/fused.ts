/**
 * The switch for the kit's fused training kernels on WebGPU (matrix multiply, attention, RMSNorm, RoPE,
 * SwiGLU, log-probabilities). They run only when the webgpu backend is active; every other backend keeps
 * the tfjs ops path, so CPU and wasm numbers do not depend on them. T2S_FUSED_KERNELS=0 turns them off on
 * WebGPU too (to rule them out when chasing a bug, and for the benches' side-by-side rows).
 */
import { tf } from "../../tf.js";

let enabled = process.env.T2S_FUSED_KERNELS !== "0";

/** Turns the fused kernels on or off (the benches run both paths). */
export function useFusedKernels(on: boolean): void {
  enabled = on;
}

/** True when the fused kernels run: the active backend is webgpu and they are not turned off. */
export function fusedKernelsActive(): boolean {
  return enabled && tf.getBackend() === "webgpu";
}
