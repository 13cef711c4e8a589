/**
 * `t2s report`: pass@1, pass@k, pass^k and headroom of one rows file, with percentile bootstrap
 * intervals over tasks, overall and per group. Each task's counts n_i, c_i pool all its rows over eval
 * runs, so pass@1 = mean over tasks of c_i / n_i and pass@k uses every sample the task has; the default
 * k is the per-run sample count (see docs/statistics.md).
 */
import { bootstrapCI, DEFAULT_B, DEFAULT_SEED, type Interval } from "./bootstrap.js";
import { mean, passAtK, passPowK } from "./estimators.js";
import { dedupeRows, evalRunOf, splitByGroup, taskCounts, taskIdOf, validateRows, withoutSetupErrors, type StatRow, type TaskCounts } from "./rows.js";
import { UsageError } from "../core/errors.js";

export interface SummaryOptions {
  /** k for pass@k and pass^k (default: the smallest per-task sample count, when that is >= 2). */
  k?: number;
  /** Grouping fields (e.g. ["difficulty", "archetype"]). */
  by?: string[];
  /** Bootstrap resamples (default 2000). */
  B?: number;
  /** Bootstrap seed (default 0). */
  seed?: number;
}

/** The numbers of one set of rows (the whole file, or one group). */
export interface SummaryStats {
  n_tasks: number;
  n_rows: number;
  k: number | null;
  pass1: number | null;
  pass1_ci: Interval | null;
  passk: number | null;
  passk_ci: Interval | null;
  powk: number | null;
  powk_ci: Interval | null;
  headroom: number | null;
}

/** The JSON of `t2s report --json`. */
export interface Summary extends SummaryStats {
  by: Record<string, Record<string, SummaryStats>>;
  /** Rows left out because they repeat an earlier row's (eval run, task, sample); the first of each counts. */
  duplicates_dropped: number;
  /** Setup-error rows left out: requests the server refused, which are no samples of the model. */
  setup_errors_left_out: number;
}

/**
 * Returns the default k for `rows`: the smallest number of samples any task has in one eval run, when
 * that is >= 2, else null. With one eval run this is the smallest per-task sample count.
 */
export function defaultK(rows: readonly StatRow[]): number | null {
  const perUnit = new Map<string, number>();
  for (const row of rows) {
    const unit = JSON.stringify([taskIdOf(row), evalRunOf(row)]);
    perUnit.set(unit, (perUnit.get(unit) ?? 0) + 1);
  }
  if (perUnit.size === 0) return null;
  let smallest = Infinity;
  for (const n of perUnit.values()) smallest = Math.min(smallest, n);
  return smallest >= 2 ? smallest : null;
}

/** Returns each task's pass@1 (c/n), in the order of `tasks`. */
export function taskPass1(tasks: readonly TaskCounts[]): number[] {
  return tasks.map((t) => t.c / t.n);
}

/** Returns pass@k of each task with n >= k (others are left out), in the order of `tasks`. */
export function taskPassK(tasks: readonly TaskCounts[], k: number): number[] {
  return tasks.filter((t) => t.n >= k).map((t) => passAtK(t.n, t.c, k));
}

/** Returns pass^k of each task with n >= k (others are left out), in the order of `tasks`. */
export function taskPassPowK(tasks: readonly TaskCounts[], k: number): number[] {
  return tasks.filter((t) => t.n >= k).map((t) => passPowK(t.n, t.c, k));
}

/** Returns the numbers of `rows` at a fixed k (null: no k-way numbers). */
export function summarizeTasks(rows: readonly StatRow[], k: number | null, B = DEFAULT_B, seed = DEFAULT_SEED): SummaryStats {
  const tasks = taskCounts(rows);
  const p1 = taskPass1(tasks);
  const pk = k === null ? [] : taskPassK(tasks, k);
  const wk = k === null ? [] : taskPassPowK(tasks, k);
  const pass1 = mean(p1);
  const passk = mean(pk);
  return {
    n_tasks: tasks.length,
    n_rows: rows.length,
    k,
    pass1,
    pass1_ci: bootstrapCI(p1, { B, seed }),
    passk,
    passk_ci: bootstrapCI(pk, { B, seed }),
    powk: mean(wk),
    powk_ci: bootstrapCI(wk, { B, seed }),
    headroom: passk !== null && pass1 !== null ? passk - pass1 : null,
  };
}

function checkOptions(opts: SummaryOptions): void {
  if (opts.k !== undefined && (!Number.isInteger(opts.k) || opts.k < 1)) throw new UsageError(`k must be an integer >= 1, got ${opts.k}`);
  if (opts.B !== undefined && (!Number.isInteger(opts.B) || opts.B < 1)) throw new UsageError(`B must be an integer >= 1, got ${opts.B}`);
  if (opts.seed !== undefined && !Number.isInteger(opts.seed)) throw new UsageError(`seed must be an integer, got ${opts.seed}`);
}

/**
 * Returns pass@1, pass@k, pass^k, headroom and their bootstrap intervals for `rows`, overall and for
 * every value of every `by` field (groups use the overall k and the same seed). Setup-error rows are left
 * out (counted in `setup_errors_left_out`); rows repeating an (eval run, task, sample) key are
 * de-duplicated first (the first kept) and counted in `duplicates_dropped`.
 */
export function summarize(input: readonly StatRow[], opts: SummaryOptions = {}): Summary {
  checkOptions(opts);
  validateRows(input, "rows");
  const graded = withoutSetupErrors(input);
  const { rows, duplicates } = dedupeRows(graded.rows);
  const B = opts.B ?? DEFAULT_B;
  const seed = opts.seed ?? DEFAULT_SEED;
  const k = opts.k ?? defaultK(rows);
  const overall = summarizeTasks(rows, k, B, seed);
  const by: Record<string, Record<string, SummaryStats>> = {};
  for (const field of opts.by ?? []) {
    // fromEntries defines own properties, so even a group value "__proto__" lands as a key
    by[field] = Object.fromEntries([...splitByGroup(rows, field)].map(([key, groupRows]) => [key, summarizeTasks(groupRows, k, B, seed)]));
  }
  return { ...overall, by, duplicates_dropped: duplicates.count, setup_errors_left_out: graded.setupErrors.count };
}

/** One point of a pass@k curve. */
export interface PassAtKPoint {
  k: number;
  /** Tasks with at least k samples (the ones averaged). */
  n_tasks: number;
  passk: number | null;
  powk: number | null;
}

/** Returns pass@k and pass^k for k = 1..maxK (default: the largest per-task sample count). */
export function passAtKCurve(rows: readonly StatRow[], maxK?: number): PassAtKPoint[] {
  const tasks = taskCounts(rows);
  const top = maxK ?? tasks.reduce((m, t) => Math.max(m, t.n), 0);
  const out: PassAtKPoint[] = [];
  for (let k = 1; k <= top; k++) {
    const pk = taskPassK(tasks, k);
    out.push({ k, n_tasks: pk.length, passk: mean(pk), powk: mean(taskPassPowK(tasks, k)) });
  }
  return out;
}

/** One task's pass rate (pooled over its samples and eval runs). */
export interface TaskRate extends TaskCounts {
  rate: number;
}

/** Returns each task's pass rate c/n, sorted by task id. */
export function taskPassRates(rows: readonly StatRow[]): TaskRate[] {
  return taskCounts(rows).map((t) => ({ ...t, rate: t.c / t.n }));
}
