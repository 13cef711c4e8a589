/**
 * The `quantization` setting (vLLM's flag name): how sampling and serving run the base model's linear
 * layers. "none" keeps the weights' own precision; "int8" runs them W8A8 on the GPU's matrix units
 * (lib/model/engine/int8-linears.ts), on WebGPU devices that offer int8 subgroup matrices. The learner of a
 * training run keeps its own precision whatever the sampler uses.
 */
import { SHARED_SETTINGS } from "../core/defaults.js";
import { T2sError, UsageError } from "../core/errors.js";
import { int8Support } from "../backend/webgpu/int8-support.js";
import type { CausalLM } from "./model.js";

export const QUANTIZATIONS = SHARED_SETTINGS.quantization.type.options;
export type QuantizationName = (typeof QUANTIZATIONS)[number];

export const QUANTIZATION_HELP = `quantization of the base's linear layers when sampling: ${QUANTIZATIONS.join(" | ")} (int8: W8A8 on the GPU's matrix units, WebGPU only)`;

/** Parses a flag's value; an unknown name is a usage error. */
export function quantizationOption(v: string): QuantizationName {
  const n = v.trim().toLowerCase();
  if (!(QUANTIZATIONS as readonly string[]).includes(n)) throw new UsageError(`--quantization must be one of ${QUANTIZATIONS.join(", ")}, got '${v}'`);
  return n as QuantizationName;
}

/**
 * Makes `model` sample with `name`; int8 is refused, with the reason, on a backend or device that cannot
 * run it (never a silent fallback to float32).
 */
export function applyQuantization(model: CausalLM, name: QuantizationName | undefined): void {
  if (!name || name === "none") {
    model.quantization = null;
    return;
  }
  if (model.backend !== "webgpu") throw new T2sError("quantization_unsupported", `--quantization int8 runs on the webgpu backend; model ${model.name} runs on ${model.backend}`);
  const s = int8Support();
  if (!s.mma) throw new T2sError("quantization_unsupported", `--quantization int8 needs a GPU with int8 matrix units: ${s.why}`);
  model.quantization = "int8";
}
