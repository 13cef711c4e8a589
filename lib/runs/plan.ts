/**
 * Resume planning: which (task, sample) episodes are still missing. Every task is topped up to k samples
 * by filling exactly the missing sample indices, so a partly done task is never skipped and a done
 * sample is never run twice; each sample's seed depends only on (seed, eval run, task, sample), so a
 * resumed sample is the same draw an uninterrupted run would have made.
 */
import { createHash } from "node:crypto";
import type { Task } from "../tasks/types.js";

export interface PlannedEpisode {
  task: Task;
  sample: number;
  seed: number;
}

/** The sampling seed of one sample: a 31-bit integer from sha256(seed, eval run, task id, sample). */
export function sampleSeed(seed: number, evalRun: string, taskId: string, sample: number): number {
  const h = createHash("sha256").update(JSON.stringify([seed, evalRun, taskId, sample])).digest();
  return h.readUInt32BE(0) & 0x7fffffff;
}

/**
 * Returns the missing episodes, sample-major (every task's sample 0, then every task's sample 1, ...) so
 * an interrupted run has spread its rows over all tasks, and how many of the k x tasks already exist.
 */
export function planEpisodes(
  tasks: Task[],
  k: number,
  evalRun: string,
  seed: number,
  has: (evalRun: string, taskId: string, sample: number) => boolean,
): { todo: PlannedEpisode[]; done: number } {
  const todo: PlannedEpisode[] = [];
  let done = 0;
  for (let s = 0; s < k; s++) {
    for (const task of tasks) {
      if (has(evalRun, task.id, s)) done++;
      else todo.push({ task, sample: s, seed: sampleSeed(seed, evalRun, task.id, s) });
    }
  }
  return { todo, done };
}
