/**
 * Task selection for a run (training or benchmark): split, band, limit. The band is the tasks whose pass
 * rate in an earlier rollout rows file lies in [lo, hi]; the rate is pooled over all rows of a task (all
 * samples, all eval runs): correct rows / rows. The rows file is read by lib/stats's reader under the
 * statistics' rules (duplicates dropped, mixed runs refused), so the band is the one `t2s report` and
 * notebook 02 count from the same file.
 */
import { existsSync, mkdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { T2sError } from "../core/errors.js";
import { writeFileAtomic } from "../core/files.js";
import { SeededRandom } from "../core/random.js";
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

/**
 * `n` of `tasks` drawn at random with `seed`, kept in their file order (all of them when there are no
 * more): a fixed subset that stands for the whole set where running every task would take too long. The
 * first n tasks would not, since a task file is ordered by template, not at random.
 */
export function sampleTasks(tasks: Task[], n: number, seed: number): Task[] {
  if (n >= tasks.length) return tasks;
  const keep = new Set(new SeededRandom(seed).sample(tasks.map((_, i) => i), n));
  return tasks.filter((_, i) => keep.has(i));
}

/** How a training config selects its tasks (lib/train/settings.ts: `split`, `band`, `limit`). */
export interface RunSelection {
  split: "train" | "holdout" | "all";
  band: BandSpec | null;
  limit: number | null;
}

/** The tasks a training run selects: selectTasks, with split "all" meaning no split filter. */
export function selectRunTasks(all: Task[], sel: RunSelection): Task[] {
  return selectTasks(all, sel.split === "all" ? undefined : sel.split, sel.limit ?? undefined, sel.band ?? undefined);
}

/** The file in a training run's output_dir that records the tasks it trains on. */
export const RUN_TASKS_FILE = "train_tasks.json";

/** What RUN_TASKS_FILE holds: the task file, the selection, and the ids (sorted) the run trains on. */
export interface RunTasks extends RunSelection {
  tasks: string;
  count: number;
  task_ids: string[];
}

/** Writes the tasks a run trains on into `<outputDir>/train_tasks.json` (atomically). */
export function writeRunTasks(outputDir: string, tasksFile: string, sel: RunSelection, tasks: readonly Task[]): void {
  mkdirSync(outputDir, { recursive: true });
  const ids = tasks.map((t) => t.id).sort();
  const record: RunTasks = { tasks: tasksFile, split: sel.split, band: sel.band, limit: sel.limit, count: ids.length, task_ids: ids };
  writeFileAtomic(join(outputDir, RUN_TASKS_FILE), JSON.stringify(record, null, 2) + "\n");
}

/** Reads a run's train_tasks.json (null when the run folder has none; T2sError "bad_run_tasks" when it is not one). */
export function readRunTasks(outputDir: string): RunTasks | null {
  const path = join(outputDir, RUN_TASKS_FILE);
  if (!existsSync(path)) return null;
  let record: RunTasks;
  try {
    record = JSON.parse(readFileSync(path, "utf8")) as RunTasks;
  } catch (e) {
    throw new T2sError("bad_run_tasks", `${path}: not valid JSON (${(e as Error).message})`);
  }
  if (!record || !Array.isArray(record.task_ids) || !record.task_ids.every((id) => typeof id === "string")) {
    throw new T2sError("bad_run_tasks", `${path}: no "task_ids" list of strings`);
  }
  return record;
}

/**
 * A seeded sample of `size` of `ids` (sorted; same ids and seed, same sample), or all of them when `size`
 * is 0 or not below their number: `sample` is then null.
 */
export function sampleTaskIds(ids: readonly string[], size: number, seed: number): { ids: string[]; sample: { size: number; seed: number } | null } {
  const sorted = [...ids].sort();
  if (size <= 0 || size >= sorted.length) return { ids: sorted, sample: null };
  const picked = new SeededRandom(seed).shuffle(sorted).slice(0, size).sort();
  return { ids: picked, sample: { size, seed } };
}
