/**
 * The training band: tasks whose pass rate in an earlier rollout rows file lies in [lo, hi]. The rate is
 * pooled over all rows of a task (all samples, all eval runs): correct rows / rows.
 */
import { readJsonl } from "../core/jsonl.js";
import { T2sError } from "../core/errors.js";
import type { Task } from "../tasks/types.js";

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
export function passRates(rows: Array<Record<string, unknown>>, source = "rows"): Map<string, PassRate> {
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

/** Returns the ids (sorted) of tasks whose pooled pass rate in the rows file lies in [lo, hi], with all rates. */
export function selectBand(rowsPath: string, lo: number, hi: number): { taskIds: string[]; rates: Map<string, PassRate> } {
  if (!(lo >= 0 && hi <= 1 && lo <= hi)) throw new T2sError("bad_band", `band [${lo}, ${hi}] must satisfy 0 <= lo <= hi <= 1`);
  const { records } = readJsonl<Record<string, unknown>>(rowsPath);
  const rates = passRates(records, rowsPath);
  // a small tolerance so a rate of exactly 0.1 computed as 1/10 is inside [0.1, ...]
  const taskIds = [...rates.values()].filter((p) => p.rate >= lo - 1e-12 && p.rate <= hi + 1e-12).map((p) => p.task_id).sort();
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
