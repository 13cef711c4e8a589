/**
 * Task selection for a run (training or benchmark): split, band, limit. The band is the tasks whose pass
 * rate in an earlier rollout rows file lies in [lo, hi]; the rate is pooled over all rows of a task (all
 * samples, all eval runs): correct rows / rows. The rows file is read by lib/stats's reader under the
 * statistics' rules (duplicates dropped, mixed runs refused), so the band is the one `t2s report` and
 * notebook 02 count from the same file.
 */
import { T2sError } from "../core/errors.js";
import { loadStatRows, readingNotes, validateRows, type StatRow } from "../stats/rows.js";
import { taskPassRates } from "../stats/summary.js";
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

/**
 * Returns the pooled pass rate of each task in `rows` (rows as lib/stats reads them: a row that is not a
 * stat row is an error naming its position; two rows of one (eval run, task, sample) are "duplicate_rows").
 */
export function passRates(rows: readonly Record<string, unknown>[], source = "rows"): Map<string, PassRate> {
  const rates = taskPassRates(validateRows(rows, source) as readonly StatRow[]);
  return new Map(rates.map((t) => [t.task_id, { task_id: t.task_id, rows: t.n, correct: t.c, rate: t.rate }]));
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

/**
 * Returns the ids (sorted) of tasks whose pooled pass rate in the rows file lies in [lo, hi], with all
 * rates, and the lines that say what reading the file left out (duplicates dropped, a cut-off last line).
 */
export function selectBand(rowsPath: string, lo: number, hi: number): { taskIds: string[]; rates: Map<string, PassRate>; notes: string[] } {
  checkBand(lo, hi);
  const file = loadStatRows(rowsPath);
  const rates = passRates(file.rows, rowsPath);
  const taskIds = [...rates.values()].filter((p) => inBand(p.rate, lo, hi)).map((p) => p.task_id).sort();
  return { taskIds, rates, notes: readingNotes(rowsPath, file) };
}

/**
 * The tasks of a run (training or benchmark): split filter, then the band, then the first `limit`. What
 * reading the band's rows file left out is said on the console, as the notebooks' readRows says it.
 */
export function selectTasks(all: Task[], split?: "train" | "holdout", limit?: number, band?: BandSpec): Task[] {
  let chosen = split ? all.filter((t) => t.split === split) : all;
  if (band) {
    const selected = selectBand(band.rows, band.lo, band.hi);
    for (const note of selected.notes) console.warn(note);
    const ids = new Set(selected.taskIds);
    chosen = chosen.filter((t) => ids.has(t.id));
  }
  return limit !== undefined ? chosen.slice(0, limit) : chosen;
}
