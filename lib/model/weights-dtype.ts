/**
 * The `weights_dtype` setting (serve, benchmark, generate, logits, the train config): how weight matrices
 * are stored on the device. Kept apart from packed.ts so the command line can parse it without loading tfjs.
 */
import { UsageError } from "../core/errors.js";

/** auto: the checkpoint's own (a bf16/f16 checkpoint stays 16-bit on WebGPU); fp32; bf16. */
export type WeightsDtype = "auto" | "fp32" | "bf16";
export const WEIGHTS_DTYPES: readonly WeightsDtype[] = ["auto", "fp32", "bf16"];
export const WEIGHTS_DTYPE_DEFAULT: WeightsDtype = "auto";
export const WEIGHTS_DTYPE_HELP = "weight storage on the device: auto (a bf16/f16 checkpoint stays 16-bit on WebGPU), fp32, or bf16 (default: T2S_WEIGHTS_DTYPE or auto)";

/** Commander parser of --weights-dtype (a usage error names the choices). */
export function weightsDtypeOption(v: string): WeightsDtype {
  if (!(WEIGHTS_DTYPES as readonly string[]).includes(v)) throw new UsageError(`--weights-dtype must be one of ${WEIGHTS_DTYPES.join(", ")}, got '${v}'`);
  return v as WeightsDtype;
}
