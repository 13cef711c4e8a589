/**
 * Whether the WebGPU device runs the int8 kernels (lib/backend/webgpu/step/int8.ts) on the GPU's matrix
 * units, decided once where the device is created (lib/backend/select.ts records the adapter here).
 *
 * Dawn offers int8 matrix blocks only through `chromium-experimental-subgroup-matrix` (behind its
 * `allow_unsafe_apis` toggle), with 16x16x32 int8 -> int32 configurations, on some GPUs (an NVIDIA H200
 * has it; Mesa's software driver does not). The kernels assume subgroups of 32 threads. Without it,
 * `--quantization int8` is refused with the reason, unless T2S_INT8_MMA=portable asks for the same
 * integers from plain WGSL (any adapter; far slower; for tests and checks).
 */
import type { MmaKind } from "./step/int8.js";

/** The adapter facts the choice reads (Dawn's GPUAdapterInfo fields). */
export interface AdapterFacts {
  features: { has(f: string): boolean };
  info?: {
    description?: string;
    subgroupMinSize?: number;
    subgroupMaxSize?: number;
    subgroupMatrixConfigs?: Iterable<{ componentType: string; resultComponentType: string; M: number; N: number; K: number }>;
  };
}

/** The device features the int8 kernels need, requested where the adapter offers them. */
export const INT8_FEATURES = ["subgroups", "chromium-experimental-subgroup-matrix"] as const;

/** Dawn's toggle that exposes experimental features such as subgroup matrices. */
export const DAWN_TOGGLES = ["enable-dawn-features=allow_unsafe_apis"];

export interface Int8Support {
  /** How int8 blocks multiply on this device, or null when int8 is unavailable. */
  mma: MmaKind | null;
  /** Why not (or which path), in words for an error message. */
  why: string;
}

let recorded: Int8Support = { mma: null, why: "no WebGPU device has been created" };

/** What an adapter allows; `granted` are the features its device was created with. */
export function int8SupportOf(adapter: AdapterFacts, granted: { has(f: string): boolean }): Int8Support {
  const name = adapter.info?.description || "this adapter";
  if (!granted.has("chromium-experimental-subgroup-matrix")) return { mma: null, why: `${name} offers no subgroup matrices (Dawn's chromium-experimental-subgroup-matrix)` };
  const configs = [...(adapter.info?.subgroupMatrixConfigs ?? [])];
  if (!configs.some((c) => c.componentType === "i8" && c.resultComponentType === "i32" && c.M === 16 && c.N === 16 && c.K === 32)) return { mma: null, why: `${name} has subgroup matrices but no int8 16x16x32 configuration` };
  if (adapter.info?.subgroupMinSize !== 32 || adapter.info?.subgroupMaxSize !== 32) return { mma: null, why: `${name} runs subgroups of ${adapter.info?.subgroupMinSize}-${adapter.info?.subgroupMaxSize} threads; the int8 kernels need 32` };
  return { mma: "subgroup-matrix", why: `${name}: int8 on subgroup matrices` };
}

/** Records the device just created (select.ts). */
export function recordInt8Support(s: Int8Support): void {
  recorded = s;
}

/** The int8 path of the current device; T2S_INT8_MMA=portable forces the plain-WGSL form. */
export function int8Support(env: NodeJS.ProcessEnv = process.env): Int8Support {
  if (env.T2S_INT8_MMA === "portable") return { mma: "portable", why: "T2S_INT8_MMA=portable: int8 blocks in plain WGSL" };
  return recorded;
}
