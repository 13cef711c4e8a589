/**
 * Task selection for a run (training or benchmark): split, band, limit. The band is the tasks whose pass
 * rate in an earlier rollout rows file lies in [lo, hi]; the rate is pooled over all rows of a task (all
 * samples, all eval runs): correct rows / rows.
 */
import { readJsonl } from "../core/jsonl.js";
import { T2sError } from "../core/errors.js";
import type { Task } from "./types.js";

/** A band: tasks whose pooled pass rate in the rows file `rows` lies in [lo, hi]. */
export interface BandSpec {
  rows: string;
  lo: number;
  hi: number;
}

export interface PassRate {
  task_id: string;
  rows: number;
  correct: number;
  rate: number;
}

/** Returns the pooled pass rate of each task in `rows` (rows without a task_id are an error naming the line). */
export function passRates(rows: readonly Record<string, unknown>[], source = "rows"): Map<string, PassRate> {
  const out = new Map<string, PassRate>();
  rows.forEach((r, i) => {
    const id = r.task_id;
    if (typeof id !== "string" || id === "") throw new T2sError("bad_rows", `${source}: record ${i + 1} has no task_id`);
    const c = r.correct;
    const ok = c === true || c === 1;
    if (!(ok || c === false || c === 0)) throw new T2sError("bad_rows", `${source}: record ${i + 1} (task ${id}) has no boolean 'correct'`);
    const p = out.get(id) ?? { task_id: id, rows: 0, correct: 0, rate: 0 };
    p.rows += 1;
    p.correct += ok ? 1 : 0;
    p.rate = p.correct / p.rows;
    out.set(id, p);
  });
  return out;
}

/** Throws the one bad_band error unless 0 <= lo <= hi <= 1. */
export function checkBand(lo: number, hi: number): void {
  if (!(lo >= 0 && hi <= 1 && lo <= hi)) throw new T2sError("bad_band", `band [${lo}, ${hi}] must satisfy 0 <= lo <= hi <= 1`);
}

/** True when a pass rate lies in the band [lo, hi]. */
export function inBand(rate: number, lo: number, hi: number): boolean {
  // a small tolerance so a rate of exactly 0.1 computed as 1/10 is inside [0.1, ...]
  return rate >= lo - 1e-12 && rate <= hi + 1e-12;
}

/** Returns the ids (sorted) of tasks whose pooled pass rate in the rows file lies in [lo, hi], with all rates. */
export function selectBand(rowsPath: string, lo: number, hi: number): { taskIds: string[]; rates: Map<string, PassRate> } {
  checkBand(lo, hi);
  const { records } = readJsonl<Record<string, unknown>>(rowsPath);
  const rates = passRates(records, rowsPath);
  const taskIds = [...rates.values()].filter((p) => inBand(p.rate, lo, hi)).map((p) => p.task_id).sort();
  return { taskIds, rates };
}

/** The tasks of a run (training or benchmark): split filter, then the band, then the first `limit`. */
export function selectTasks(all: Task[], split?: "train" | "holdout", limit?: number, band?: BandSpec): Task[] {
  let chosen = split ? all.filter((t) => t.split === split) : all;
  if (band) {
    const ids = new Set(selectBand(band.rows, band.lo, band.hi).taskIds);
    chosen = chosen.filter((t) => ids.has(t.id));
  }
  return limit !== undefined ? chosen.slice(0, limit) : chosen;
}
