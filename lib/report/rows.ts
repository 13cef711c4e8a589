/**
 * The facts of a row the report shows (outcome, group, truncation), over rows read by lib/stats/rows.ts,
 * the one rows reader, so a notebook table and `t2s report` count and group one file the same way. The
 * row type is lib/runs/row.ts's, imported type-only.
 */
import { duplicatesNote, groupKeyOf, isCorrect as statIsCorrect, readStatRows, setupErrorsNote } from "../stats/rows.js";
import { existsSync } from "node:fs";
import type { RowRecord } from "../runs/row.js";
import { T2sError } from "../core/errors.js";

/**
 * A row as the report reads it: the one row schema of lib/runs/row.ts as read back from a file (task_id,
 * sample and correct always there, any other field possibly missing).
 */
export type ReportRow = RowRecord;

/**
 * Reads a rows file with lib/stats's reader (readStatRows); throws T2sError naming the file when it is
 * missing, malformed, empty or mixes runs. A row that repeats an earlier row's (eval run, task, sample) is
 * dropped (the first is kept, as the rows store keeps it) and the drop is said on the console (a notebook
 * shows it under the cell); so are setup-error rows (requests the server refused), which are left out.
 */
export function readRows(path: string): ReportRow[] {
  if (!existsSync(path)) throw new T2sError("not_found", `rows file ${path} does not exist`);
  const file = readStatRows(path);
  if (file.setupErrors.count) console.warn(setupErrorsNote(path, file.setupErrors));
  if (file.rows.length === 0) throw new T2sError("no_rows", `${path} has no ${file.setupErrors.count ? "graded " : ""}rows`);
  if (file.duplicates.count) console.warn(duplicatesNote(path, file.duplicates));
  return file.rows as ReportRow[];
}

/** True when the row was graded correct (lib/stats/rows.ts isCorrect). */
export const isCorrect: (row: ReportRow) => boolean = statIsCorrect;

/** The row's outcome, derived from its markers when the file has no outcome field. */
export function outcomeOf(row: ReportRow): string {
  if (typeof row.outcome === "string" && row.outcome) return row.outcome;
  if (isCorrect(row)) return "correct";
  if (row.has_sql === false) return "no_sql";
  if (row.executes === false) return "sql_error";
  return "wrong_rows";
}

/** True when the reply was cut by the token or context budget. */
export function isTruncated(row: ReportRow): boolean {
  return row.outcome === "truncated" || row.finish_reason === "length";
}

/** The row's value of a grouping field as text ("(missing)" when absent, null or ""): lib/stats/rows.ts groupKeyOf. */
export function groupOf(row: ReportRow, field: string): string {
  return groupKeyOf(row, field);
}

/** Outcomes in reading order: success first, then failures from "answered wrong" to "never answered". */
export const OUTCOME_ORDER = ["correct", "wrong_rows", "too_large", "sql_error", "timeout", "unsafe", "no_sql", "truncated"];

/** Returns the outcomes present in `rows`, known ones in OUTCOME_ORDER, then any others sorted. */
export function outcomesIn(rows: readonly ReportRow[]): string[] {
  const seen = new Set(rows.map(outcomeOf));
  const known = OUTCOME_ORDER.filter((o) => seen.has(o));
  const other = [...seen].filter((o) => !OUTCOME_ORDER.includes(o)).sort();
  return [...known, ...other];
}

/** Returns the distinct values of `field` in `rows`, difficulty levels in easy/medium/hard order, others sorted. */
export function groupsIn(rows: readonly ReportRow[], field: string): string[] {
  const values = [...new Set(rows.map((r) => groupOf(r, field)))];
  const rank = (v: string) => { const i = ["easy", "medium", "hard", "extra"].indexOf(v); return i < 0 ? 99 : i; };
  return values.sort((a, b) => rank(a) - rank(b) || (a < b ? -1 : a > b ? 1 : 0));
}
