/**
 * Verification of a task set: every gold query is executed twice. Two modes:
 *  - "train" (default; the rule for authoring training tasks): a task is kept only when its gold runs,
 *    returns 1-50 rows, not every value is NULL, and both runs give the same result;
 *  - "eval" (for evaluation sets used as published): every gold that runs and gives the same result twice
 *    is kept, whatever its row count (up to EVAL_MAX_ROWS) or values.
 * Golds run in the task's dialect unless `dialect` says otherwise.
 */
import { jsonWithIntegers } from "../db/format.js";
import type { ExecOutcome, ExecSuccess, Executor } from "../db/types.js";
import type { Dialect } from "../db/dialect.js";
import type { Task } from "./types.js";
import { CONCURRENCY, QUERY_TIMEOUT_MS } from "../core/defaults.js";

export const MAX_GOLD_ROWS = 50;
/** Row cap of a gold in eval mode: far beyond any evaluation set's answers (the result-size cap still holds). */
export const EVAL_MAX_ROWS = 1_000_000;

export type VerifyMode = "train" | "eval";
export const VERIFY_MODES: readonly VerifyMode[] = ["train", "eval"];

export type DropReason = "no_database" | "sql_error" | "unsafe" | "timeout" | "too_large" | "empty" | "too_many_rows" | "all_null" | "unstable";

export interface Drop {
  task: Task;
  reason: DropReason;
  detail: string;
}

export interface VerifyReport {
  kept: Task[];
  dropped: Drop[];
  /** Dropped counts by reason. */
  byReason: Record<string, number>;
}

export interface VerifyOptions {
  executor: Executor;
  /** Queries in flight at once (default 8). */
  concurrency?: number;
  timeoutMs?: number;
  /** "train" (default) or "eval"; see the module comment. */
  mode?: VerifyMode;
  /** Run every gold in this dialect instead of the task's own. */
  dialect?: Dialect;
  /** Called after each task with (done, total). */
  onProgress?: (done: number, total: number) => void;
}

function canonical(r: ExecSuccess): string {
  return jsonWithIntegers([r.columns, r.rows]);
}

function canonicalUnordered(r: ExecSuccess): string {
  return jsonWithIntegers([r.columns, r.rows.map((row) => jsonWithIntegers(row)).sort()]);
}

function failureReason(o: ExecOutcome & { ok: false }): DropReason {
  const k = o.error.kind;
  return k === "syntax" || k === "runtime" ? "sql_error" : k;
}

/** Why one gold result is unusable, or null when it is fine. */
export function judgeResult(first: ExecOutcome, second: ExecOutcome, mode: VerifyMode = "train"): { reason: DropReason; detail: string } | null {
  if (first.ok === false) return { reason: failureReason(first), detail: first.error.message };
  if (second.ok === false) return { reason: "unstable", detail: `second run failed: ${second.error.message}` };
  if (mode === "eval") {
    if (first.truncated) return { reason: "too_many_rows", detail: `more than ${first.rows.length} rows` };
    return stable(first, second) ? null : { reason: "unstable", detail: "the two runs returned different rows" };
  }
  if (first.rows.length === 0) return { reason: "empty", detail: "no rows" };
  if (first.truncated || first.rows.length > MAX_GOLD_ROWS) return { reason: "too_many_rows", detail: `more than ${MAX_GOLD_ROWS} rows` };
  if (first.rows.every((row) => row.every((v) => v === null))) return { reason: "all_null", detail: `${first.rows.length} rows, every value NULL` };
  if (!stable(first, second)) return { reason: "unstable", detail: "the two runs returned different rows" };
  return null;
}

function stable(first: ExecSuccess, second: ExecSuccess): boolean {
  return canonical(first) === canonical(second) || canonicalUnordered(first) === canonicalUnordered(second);
}

/** Runs `fn` over items with at most `limit` in flight; results keep the input order. */
export async function mapLimit<T, R>(items: T[], limit: number, fn: (item: T, i: number) => Promise<R>): Promise<R[]> {
  const out = new Array<R>(items.length);
  let next = 0;
  const worker = async () => {
    while (next < items.length) {
      const i = next++;
      out[i] = await fn(items[i], i);
    }
  };
  await Promise.all(Array.from({ length: Math.max(1, Math.min(limit, items.length)) }, worker));
  return out;
}

/** The verdict of one task: null when kept, else why it was dropped. */
export async function verifyTask(task: Task, executor: Executor, timeoutMs = QUERY_TIMEOUT_MS, mode: VerifyMode = "train", dialect?: Dialect): Promise<{ reason: DropReason; detail: string } | null> {
  const opts = { timeoutMs, maxRows: mode === "eval" ? EVAL_MAX_ROWS : MAX_GOLD_ROWS + 1, dialect: dialect ?? task.dialect };
  const first = await executor.execute(task.db_path, task.gold_sql, opts);
  const second = first.ok ? await executor.execute(task.db_path, task.gold_sql, opts) : first;
  return judgeResult(first, second, mode);
}

/** Verifies every task; the kept ones come back in input order, drops with their reasons. */
export async function verifyTasks(tasks: Task[], opts: VerifyOptions): Promise<VerifyReport> {
  let done = 0;
  const verdicts = await mapLimit(tasks, opts.concurrency ?? CONCURRENCY, async (t) => {
    const v = await verifyTask(t, opts.executor, opts.timeoutMs, opts.mode, opts.dialect);
    opts.onProgress?.(++done, tasks.length);
    return v;
  });
  const kept: Task[] = [];
  const dropped: Drop[] = [];
  const byReason: Record<string, number> = {};
  verdicts.forEach((v, i) => {
    if (v === null) kept.push(tasks[i]);
    else {
      dropped.push({ task: tasks[i], ...v });
      byReason[v.reason] = (byReason[v.reason] ?? 0) + 1;
    }
  });
  return { kept, dropped, byReason };
}
