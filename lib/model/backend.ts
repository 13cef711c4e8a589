/**
 * Picks the tfjs backend: WebGPU through the `webgpu` package (Dawn) when a GPU adapter exists,
 * tfjs-node-gpu / tfjs-node when the user installed them, then wasm, then cpu. `T2S_BACKEND` or an
 * explicit name overrides. The WebGPU backend registers itself at import only if navigator.gpu is already
 * there, so the Dawn instance is installed on globalThis first.
 */
import { T2sError } from "../errors.js";
import { tf } from "./tf.js";

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

async function tryWebgpu(): Promise<string | null> {
  const g = globalThis as unknown as { navigator?: { gpu?: unknown } };
  if (!g.navigator?.gpu) {
    const webgpu = (await dynamicImport("webgpu")) as { create: (opts: string[]) => unknown; globals: Record<string, unknown> };
    Object.assign(globalThis, webgpu.globals);
    const gpu = webgpu.create([]) as { requestAdapter: () => Promise<unknown> };
    const adapter = await gpu.requestAdapter();
    if (!adapter) return "no GPU adapter";
    if (!g.navigator) Object.defineProperty(globalThis, "navigator", { value: { gpu }, configurable: true, writable: true });
    else (g.navigator as { gpu?: unknown }).gpu = gpu;
  }
  await dynamicImport("@tensorflow/tfjs-backend-webgpu");
  return null;
}

async function tryRegister(name: BackendName): Promise<string | null> {
  try {
    if (name === "webgpu") {
      const why = await tryWebgpu();
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
 * Makes `want` (or the best available with "auto") the active tfjs backend and returns which one runs and
 * why the others were skipped. An explicit backend that cannot start is an error, never a silent fallback.
 */
export async function useBackend(want: string = process.env.T2S_BACKEND ?? "cpu"): Promise<BackendChoice> {
  const name = normalizeBackend(want);
  if (chosen && (name === "auto" || chosen.backend === name) && tf.getBackend() === chosen.backend) return chosen;
  const skipped: Record<string, string> = {};
  if (name !== "auto") {
    const why = await tryRegister(name);
    if (why) throw new T2sError("backend_unavailable", `backend ${name} is not available: ${why}`);
    return (chosen = { backend: name, skipped });
  }
  for (const b of BACKENDS) {
    const why = await tryRegister(b);
    if (!why) return (chosen = { backend: b, skipped });
    skipped[b] = why;
  }
  throw new T2sError("backend_unavailable", `no tfjs backend could start: ${JSON.stringify(skipped)}`);
}

/** The tfjs backend active now. */
export function activeBackend(): string {
  return tf.getBackend();
}
