/**
 * The one registration entry point of the training kernels on WebGPU: the kit's matrix multiply in front of
 * tfjs's BatchMatMul, and the fused attention, RMSNorm, RoPE/SwiGLU, LoRA linear, log-probability and
 * optimizer kernels with their gradients, and the 16-bit weight widening/narrowing kernels, as tfjs kernels of the webgpu backend. lib/backend/select.ts calls
 * it once it has loaded that backend, so every fused op finds its kernel whichever module runs it first.
 * Each registration runs once; a second call does nothing.
 */
import { registerAttentionKernels } from "./attention-train.js";
import { installBatchMatMul } from "./batch-matmul.js";
import { registerRmsNormKernels } from "./layer-kernels.js";
import { registerLogprobKernels } from "./logprob-kernels.js";
import { registerLoraLinearKernels } from "./lora-linear.js";
import { registerWebgpuOptimizerKernels } from "./optimizer.js";
import { registerRopeSwigluKernels } from "./rope-swiglu.js";
import { registerWiden16Kernel } from "./widen16.js";

/** Registers every training kernel of the webgpu backend (after @tensorflow/tfjs-backend-webgpu is loaded). */
export function registerTrainingKernels(): void {
  installBatchMatMul();
  registerAttentionKernels();
  registerRmsNormKernels();
  registerRopeSwigluKernels();
  registerLoraLinearKernels();
  registerLogprobKernels();
  registerWebgpuOptimizerKernels();
  registerWiden16Kernel();
}
