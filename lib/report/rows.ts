/**
 * The rollout rows the report reads, typed for figures and tables. The fields mirror lib/runs/row.ts but
 * are declared here, so notebooks importing lib/report do not pull the episode loop into tslab's compile.
 */
import { existsSync } from "node:fs";
import { readJsonl } from "../core/jsonl.js";
import { T2sError } from "../core/errors.js";
import { dedupeRows, duplicatesNote, type StatRow } from "../stats/rows.js";

/** A chat message of a transcript (the shape lib/policy uses). */
export interface TurnMessage {
  role: string;
  content: string | null;
  tool_calls?: Array<{ id?: string; type?: string; function: { name: string; arguments: string } }>;
  tool_call_id?: string;
  name?: string;
}

/** One graded episode as a rows file holds it; fields other than task_id/sample/correct may be missing. */
export interface ReportRow {
  task_id: string;
  sample: number;
  correct: boolean | 0 | 1;
  eval_run?: string;
  run_id?: string;
  db_id?: string;
  split?: string;
  difficulty?: string;
  archetype?: string;
  policy?: string;
  model?: string | null;
  adapter?: string | null;
  turns?: TurnMessage[];
  n_assistant_turns?: number;
  graded_turn?: number;
  final_sql?: string | null;
  outcome?: string;
  executes?: boolean;
  has_sql?: boolean;
  reward?: number;
  reason?: string;
  tokens_in?: number;
  tokens_out?: number;
  finish_reason?: string;
  latency_ms?: number;
  n_tool_calls?: number;
  invalid_tool_calls?: number;
  [field: string]: unknown;
}

/**
 * Reads a rows file; throws T2sError naming the file when it is missing, malformed or empty. A row that
 * repeats an earlier row's (eval run, task, sample) is dropped (the first is kept, as the rows store keeps
 * it) and the drop is said on the console (a notebook shows it under the cell).
 */
export function readRows(path: string): ReportRow[] {
  if (!existsSync(path)) throw new T2sError("not_found", `rows file ${path} does not exist`);
  const { records } = readJsonl<ReportRow>(path);
  records.forEach((r, i) => {
    if (r === null || typeof r !== "object" || typeof r.task_id !== "string") throw new T2sError("bad_rows", `${path}: record ${i + 1} has no task_id`);
  });
  if (records.length === 0) throw new T2sError("no_rows", `${path} has no rows`);
  const { rows, duplicates } = dedupeRows(records);
  if (duplicates.count) console.warn(duplicatesNote(path, duplicates));
  return rows;
}

/** Returns the rows as lib/stats rows (same objects). */
export function statRows(rows: readonly ReportRow[]): StatRow[] {
  return rows as unknown as StatRow[];
}

/** True when the row was graded correct. */
export function isCorrect(row: ReportRow): boolean {
  return row.correct === true || row.correct === 1;
}

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

/** The row's value of a grouping field as text ("(missing)" when absent). */
export function groupOf(row: ReportRow, field: string): string {
  const v = row[field];
  if (v === undefined || v === null || v === "") return "(missing)";
  return typeof v === "string" ? v : JSON.stringify(v);
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
