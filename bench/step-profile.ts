/**
 * One training step under tf.profile: kernel time by kernel name (WebGPU timestamp queries), the GPU
 * dispatches, and how much of the step's wall time no kernel accounts for (dispatch, read-backs, JS).
 */
import { tf } from "../lib/backend/tf.js";
import { countDispatches } from "./dispatches.js";

export interface StepProfile {
  wall_ms: number;
  kernel_ms: number;
  kernel_count: number;
  /** GPU dispatches (WebGPU only; tf.profile's kernels include Reshape/Identity, which dispatch nothing). */
  dispatches: number | null;
  top: { name: string; ms: number; share: number; count: number }[];
}

/** Writes a step profile to stderr as soon as it is measured (a long run cut by a timeout keeps it). */
export function printProfile(mode: string, p: StepProfile): StepProfile {
  const w = (line: string) => process.stderr.write(line + "\n");
  w(`profile ${mode}: wall ${p.wall_ms.toFixed(0)} ms, kernels ${p.kernel_ms.toFixed(0)} ms (${p.kernel_count} kernels${p.dispatches === null ? "" : `, ${p.dispatches} GPU dispatches`}), not in kernels ${(100 * (1 - p.kernel_ms / p.wall_ms)).toFixed(0)}%`);
  w("kernel                     ms   share     calls");
  for (const k of p.top) w(`${k.name.padEnd(22)} ${k.ms.toFixed(1).padStart(8)}  ${(100 * k.share).toFixed(1).padStart(5)}%  ${String(k.count).padStart(8)}`);
  return p;
}

/** Runs one step under tf.profile and sums kernel time by kernel name (backends without timers report 0). */
export async function profileStep(step: () => Promise<unknown>): Promise<StepProfile> {
  const t0 = performance.now();
  const { result: info, dispatches } = await countDispatches(() =>
    tf.profile(async () => {
      await step();
      return [];
    }),
  );
  const wall = performance.now() - t0;
  const byName = new Map<string, { ms: number; count: number }>();
  for (const k of info.kernels) {
    const ms = typeof k.kernelTimeMs === "number" ? k.kernelTimeMs : 0;
    const e = byName.get(k.name) ?? { ms: 0, count: 0 };
    e.ms += ms;
    e.count++;
    byName.set(k.name, e);
  }
  const total = [...byName.values()].reduce((a, e) => a + e.ms, 0);
  const top = [...byName.entries()].map(([name, e]) => ({ name, ms: e.ms, share: total > 0 ? e.ms / total : 0, count: e.count })).sort((a, b) => b.ms - a.ms).slice(0, 15);
  return { wall_ms: wall, kernel_ms: total, kernel_count: info.kernels.length, dispatches, top };
}
