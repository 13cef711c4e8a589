/**
 * Picks the step runner for a model's backend: on WebGPU the device runner of lib/model/webgpu/ (cache in GPU
 * buffers, sampling on the device), everywhere else the tfjs-ops runner. `T2S_WEBGPU_RUNNER=0` keeps WebGPU
 * on the tfjs-ops runner (for comparisons; it reads every layer's projections back, so it is slow there).
 */
import type { CausalLM } from "../model.js";
import type { StepRunner } from "./runner.js";
import { TfjsRunner } from "./tfjs-runner.js";

/** A runner holding `slots` sequences of `model` with the named unmerged adapter applied. */
export async function createRunner(model: CausalLM, opts: { adapter: string | null; slots: number }): Promise<StepRunner> {
  if (model.backend === "webgpu" && process.env.T2S_WEBGPU_RUNNER !== "0") {
    const { createWebgpuRunner } = await import("../webgpu/runner.js");
    return createWebgpuRunner(model, { adapter: opts.adapter, slots: opts.slots });
  }
  return new TfjsRunner(model, opts.slots, opts.adapter);
}
