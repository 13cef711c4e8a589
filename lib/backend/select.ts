/**
 * Picks the tfjs backend: WebGPU through the `webgpu` package (Dawn) when a GPU adapter exists,
 * tfjs-node-gpu / tfjs-node when the user installed them, then wasm, then cpu. `T2S_BACKEND` or an
 * explicit name overrides. The WebGPU backend registers itself at import only if navigator.gpu is already
 * there, so the Dawn instance is installed on globalThis first.
 */
import { existsSync, readFileSync } from "node:fs";
import { delimiter, join } from "node:path";
import { DEFAULT_BACKEND } from "../core/defaults.js";
import { T2sError } from "../core/errors.js";
import { tf } from "./tf.js";
import { registerTrainingKernels } from "./webgpu/train/register.js";
import { usePoolSizeClasses } from "./gpu-pool.js";
import { DAWN_TOGGLES, INT8_FEATURES, int8SupportOf, recordInt8Support, type AdapterFacts } from "./webgpu/int8-support.js";

export const BACKENDS = ["webgpu", "tensorflow", "wasm", "cpu"] as const;
export type BackendName = (typeof BACKENDS)[number];

/** Backend names accepted on the command line (`node` and `tfjs-node` mean tensorflow). */
export function normalizeBackend(name: string): BackendName | "auto" {
  const n = name.trim().toLowerCase();
  if (n === "auto" || n === "") return "auto";
  if (n === "node" || n === "tfjs-node" || n === "tfjs-node-gpu" || n === "tensorflow") return "tensorflow";
  if ((BACKENDS as readonly string[]).includes(n)) return n as BackendName;
  throw new T2sError("usage", `unknown backend '${name}': use auto, ${BACKENDS.join(", ")}`);
}

async function dynamicImport(name: string): Promise<unknown> {
  return await import(name);
}

interface GpuAdapterLike {
  features: { has(f: string): boolean };
  info?: AdapterFacts["info"] & { architecture?: string; vendor?: string; isFallbackAdapter?: boolean };
  requestDevice: (d?: { requiredFeatures?: unknown[] }) => Promise<unknown>;
}

/**
 * tfjs-backend-webgpu asks for features as a nested array; strict WebIDL bindings (Dawn's) reject that, so
 * the request is flattened and cut to what the adapter offers. The int8 kernels' features are added where
 * the adapter has them, and what the device got decides the int8 path (webgpu/int8-support.ts).
 */
function patchRequestAdapter(gpu: { requestAdapter: (o?: unknown) => Promise<GpuAdapterLike | null> }): void {
  const original = gpu.requestAdapter.bind(gpu);
  const patched = async (o?: unknown) => {
    const adapter = await original(o);
    if (!adapter) return adapter;
    const requestDevice = adapter.requestDevice.bind(adapter);
    const fixed = async (d?: { requiredFeatures?: unknown[] }) => {
      const features = [...new Set([...(d?.requiredFeatures ?? []).flat(), ...INT8_FEATURES])].filter((f): f is string => typeof f === "string" && adapter.features.has(f));
      const device = (await requestDevice({ ...d, requiredFeatures: features })) as { features?: { has(f: string): boolean } };
      recordInt8Support(int8SupportOf(adapter, device.features ?? new Set<string>()));
      return device;
    };
    try {
      Object.defineProperty(adapter, "requestDevice", { value: fixed, configurable: true });
    } catch {
      // a frozen adapter keeps its own requestDevice
    }
    return adapter;
  };
  try {
    Object.defineProperty(gpu, "requestAdapter", { value: patched, configurable: true });
  } catch {
    // as above
  }
}

/**
 * A software Vulkan driver (Mesa's lavapipe/llvmpipe, SwiftShader) runs WebGPU on the CPU, far slower than
 * wasm: "auto" skips it, an explicit `webgpu` takes it (the kernels' tests run on one).
 */
export function isSoftwareAdapter(info: GpuAdapterLike["info"]): boolean {
  if (!info) return false;
  if (info.isFallbackAdapter) return true;
  return /llvmpipe|lavapipe|swiftshader|software/i.test(`${info.description ?? ""} ${info.architecture ?? ""} ${info.vendor ?? ""}`);
}

/** Where the dynamic linker looks for libraries besides LD_LIBRARY_PATH and its cache. */
const LIBRARY_DIRS = ["/lib", "/usr/lib", "/lib64", "/usr/lib64", "/usr/local/lib", "/lib/x86_64-linux-gnu", "/usr/lib/x86_64-linux-gnu", "/lib/aarch64-linux-gnu", "/usr/lib/aarch64-linux-gnu"];

/**
 * Whether Dawn can load a Vulkan loader (libvulkan.so.1): on Linux without one, Dawn prints a multi-line
 * "Couldn't load Vulkan" warning with a stack location on stderr and finds no adapter, so the kit does not
 * start it there. Looks where the dynamic linker would: LD_LIBRARY_PATH, /etc/ld.so.cache, the usual
 * library folders. Elsewhere (macOS, Windows) Dawn uses Metal or Direct3D: always true.
 */
export function vulkanLoaderFound(env: NodeJS.ProcessEnv = process.env, platform: string = process.platform, fs: { exists: (p: string) => boolean; read: (p: string) => string } = { exists: existsSync, read: (p) => readFileSync(p, "latin1") }): boolean {
  if (platform !== "linux") return true;
  const name = "libvulkan.so.1";
  const dirs = [...(env.LD_LIBRARY_PATH ?? "").split(delimiter).filter(Boolean), ...LIBRARY_DIRS];
  if (dirs.some((d) => fs.exists(join(d, name)))) return true;
  try {
    return fs.read("/etc/ld.so.cache").includes(name);
  } catch {
    return false;
  }
}

/**
 * The software driver VK_DRIVER_FILES (or the older VK_ICD_FILENAMES) names when it names only software
 * ones (Mesa's lavapipe, SwiftShader), else null. "auto" would skip their adapter anyway; knowing it from
 * the names spares starting Dawn, which prints warnings about such an adapter's limits on stderr.
 */
export function softwareDriverOnly(env: NodeJS.ProcessEnv = process.env): string | null {
  const files = (env.VK_DRIVER_FILES || env.VK_ICD_FILENAMES || "").split(delimiter).filter(Boolean);
  if (files.length === 0 || !files.every((f) => /lvp_icd|swiftshader/i.test(f))) return null;
  return files.join(delimiter);
}

/** Why webgpu was not tried on a Linux machine without a Vulkan loader. */
export const NO_VULKAN_LOADER = "no Vulkan loader (libvulkan.so.1 not found: install libvulkan1, or see environment.md, \"GPU host\")";

async function tryWebgpu(allowSoftware: boolean): Promise<string | null> {
  const g = globalThis as unknown as { navigator?: { gpu?: unknown } };
  if (!g.navigator?.gpu) {
    if (!vulkanLoaderFound()) return NO_VULKAN_LOADER;
    const software = allowSoftware ? null : softwareDriverOnly();
    if (software) return `only a software Vulkan driver (VK_DRIVER_FILES=${software})`;
    const webgpu = (await import("webgpu")) as unknown as { create: (opts: string[]) => unknown; globals: Record<string, unknown> };
    Object.assign(globalThis, webgpu.globals);
    const gpu = webgpu.create(DAWN_TOGGLES) as { requestAdapter: (o?: unknown) => Promise<GpuAdapterLike | null> };
    const adapter = await gpu.requestAdapter();
    if (!adapter) return "no GPU adapter";
    if (!allowSoftware && isSoftwareAdapter(adapter.info)) return `only a software adapter (${adapter.info?.description || adapter.info?.architecture || "fallback"})`;
    patchRequestAdapter(gpu);
    if (!g.navigator) Object.defineProperty(globalThis, "navigator", { value: { gpu }, configurable: true, writable: true });
    else (g.navigator as { gpu?: unknown }).gpu = gpu;
  }
  // a literal specifier, so bundles carry the backend (it must share this process's tfjs-core)
  await import("@tensorflow/tfjs-backend-webgpu");
  // the kit's matrix multiply in front of tfjs's and the fused training kernels (lib/backend/webgpu/train/register.ts)
  registerTrainingKernels();
  return null;
}

async function tryRegister(name: BackendName, explicit: boolean): Promise<string | null> {
  try {
    if (name === "webgpu") {
      const why = await tryWebgpu(explicit);
      if (why) return why;
    } else if (name === "tensorflow") {
      try {
        await dynamicImport("@tensorflow/tfjs-node-gpu");
      } catch {
        await dynamicImport("@tensorflow/tfjs-node");
      }
    } else if (name === "wasm") {
      await dynamicImport("@tensorflow/tfjs-backend-wasm");
    }
    if (!tf.findBackend(name) && !tf.engine().registryFactory[name]) return "not registered";
    const ok = await tf.setBackend(name);
    if (ok && name === "webgpu") usePoolSizeClasses();
    return ok ? null : "failed to initialise";
  } catch (e) {
    return (e as Error).message.split("\n")[0];
  }
}

export interface BackendChoice {
  backend: BackendName;
  /** Why each better backend was skipped. */
  skipped: Record<string, string>;
}

let chosen: BackendChoice | null = null;

/**
 * Makes `want` (default T2S_BACKEND, else DEFAULT_BACKEND; "auto": the best available) the active tfjs backend and returns which one runs and
 * why the others were skipped. An explicit backend that cannot start is an error, never a silent fallback.
 */
export async function useBackend(want: string = process.env.T2S_BACKEND ?? DEFAULT_BACKEND): Promise<BackendChoice> {
  const name = normalizeBackend(want);
  if (chosen && (name === "auto" || chosen.backend === name) && tf.getBackend() === chosen.backend) return chosen;
  const skipped: Record<string, string> = {};
  if (name !== "auto") {
    const why = await tryRegister(name, true);
    if (why) throw new T2sError("backend_unavailable", `backend ${name} is not available: ${why}`);
    return (chosen = { backend: name, skipped });
  }
  for (const b of BACKENDS) {
    const why = await tryRegister(b, false);
    if (!why) return (chosen = { backend: b, skipped });
    skipped[b] = why;
  }
  throw new T2sError("backend_unavailable", `no tfjs backend could start: ${JSON.stringify(skipped)}`);
}
