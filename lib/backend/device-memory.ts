/**
 * How much memory the training device has, for the memory plan. WebGPU does not say (an adapter's limits
 * cap one buffer, not the card), so it is read from T2S_GPU_MEMORY_GB when set, else from `nvidia-smi` on
 * hosts that have it; otherwise it is unknown and the plan is printed without a verdict.
 */
import { execFileSync } from "node:child_process";
import { T2sError } from "../core/errors.js";

/** Bytes of device memory, or null when nothing says. */
export function deviceMemoryBytes(env: NodeJS.ProcessEnv = process.env): number | null {
  const set = env.T2S_GPU_MEMORY_GB;
  if (set !== undefined && set !== "") {
    const gb = Number(set);
    if (!(gb > 0)) throw new T2sError("usage", `T2S_GPU_MEMORY_GB must be a positive number of GB, got '${set}'`);
    return gb * 1e9;
  }
  try {
    const out = execFileSync("nvidia-smi", ["--query-gpu=memory.total", "--format=csv,noheader,nounits"], { encoding: "utf8", timeout: 5000, stdio: ["ignore", "pipe", "ignore"] });
    const mib = Number(out.trim().split("\n")[0]);
    return mib > 0 ? mib * 1024 * 1024 : null;
  } catch {
    return null;
  }
}
