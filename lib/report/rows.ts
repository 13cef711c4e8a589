/**
 * The facts of a row the report shows (outcome, group, truncation), over rows read by lib/stats/rows.ts,
 * the one rows reader, so a notebook table and `t2s report` count and group one file the same way. The
 * row type is lib/runs/row.ts's, imported type-only.
 */
import { groupKeyOf, isCorrect as statIsCorrect, loadStatRows, readingNotes } from "../stats/rows.js";
import type { RowRecord } from "../runs/row.js";

/**
 * A row as the report reads it: the one row schema of lib/runs/row.ts as read back from a file (task_id,
 * sample and correct always there, any other field possibly missing).
 */
export type ReportRow = RowRecord;

/**
 * Reads a rows file with lib/stats's reader (loadStatRows); throws T2sError naming the file when it is
 * missing, malformed, empty or mixes runs. A row that repeats an earlier row's (eval run, task, sample) is
 * dropped (the first is kept, as the rows store keeps it), and that and a cut-off last line are said on
 * the console (a notebook shows it under the cell).
 */
export function readRows(path: string): ReportRow[] {
  const file = loadStatRows(path);
  for (const note of readingNotes(path, file)) console.warn(note);
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
