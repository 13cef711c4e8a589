/**
 * Stat rows: the one reader of rollout rows files (`t2s report`, `t2s delta`, the notebooks' tables and
 * figures and a run's training band all read through loadStatRows / readStatRows), validated, normalised
 * (a numeric task_id becomes its text, an empty group value counts as missing) and grouped into per-task
 * counts. Everything downstream works on
 * counts sorted by task id, so a statistic never depends on the order of the lines in the file. Rows of
 * different runs in one file are refused (mixedRuns), never pooled or de-duplicated into each other.
 * Setup-error rows (requests the server refused) are left out of every count and reported apart.
 */
import { existsSync, readFileSync } from "node:fs";
import { T2sError } from "../core/errors.js";
import { readJsonl } from "../core/jsonl.js";

/**
 * The fields of a rollout row (lib/runs/row.ts) every statistic reads: one graded sample. Any other field
 * (difficulty, archetype, executes, ...) may be used for grouping. A kit row is a StatRow as it is; a row
 * from another tool needs only these.
 */
export interface StatRow {
  task_id: string;
  sample: number;
  eval_run?: string;
  correct: boolean | 0 | 1;
  [field: string]: unknown;
}

/**
 * The outcome of a row whose episode the server refused for the run's setup (the prompt does not fit the
 * model's context, a refused key, an unknown model): the model never answered, so the row is no sample.
 * Every statistic leaves such rows out (withoutSetupErrors) and says how many it left out.
 */
export const SETUP_ERROR = "setup_error";

/** True for a setup-error row (outcome "setup_error"): a refused request, not a graded sample. */
export function isSetupError(row: Record<string, unknown>): boolean {
  return row.outcome === SETUP_ERROR;
}

/** Setup-error rows left out of the statistics, by reason (the row's `setup_error`, e.g. "context_exceeded"). */
export interface SetupErrors {
  count: number;
  by: Record<string, number>;
}

/** Returns the graded rows of `rows` (setup errors left out) and what was left out. */
export function withoutSetupErrors<T extends Record<string, unknown>>(rows: readonly T[]): { rows: T[]; setupErrors: SetupErrors } {
  const kept: T[] = [];
  const setupErrors: SetupErrors = { count: 0, by: {} };
  for (const row of rows) {
    if (!isSetupError(row)) {
      kept.push(row);
      continue;
    }
    const reason = typeof row.setup_error === "string" && row.setup_error ? row.setup_error : "unknown";
    setupErrors.count++;
    setupErrors.by[reason] = (setupErrors.by[reason] ?? 0) + 1;
  }
  return { rows: kept, setupErrors };
}

/** The one line that says a rows file's setup errors were left out of its numbers. */
export function setupErrorsNote(path: string, s: SetupErrors): string {
  const by = Object.entries(s.by).sort((a, b) => b[1] - a[1] || compareIds(a[0], b[0])).map(([k, v]) => `${k} ${v}`).join(", ");
  return `${path}: left out ${s.count} setup-error row(s) (requests the server refused: ${by}); they are not samples of the model`;
}

/** The eval run a row belongs to when it names none. */
export const DEFAULT_EVAL_RUN = "0";

/** The group key used for rows that lack a grouping field (or have it null or ""). */
export const MISSING_GROUP = "(missing)";

/** Returns why `record` is not a usable stat row, or null when it is. */
export function rowProblem(record: unknown): string | null {
  if (record === null || typeof record !== "object" || Array.isArray(record)) return "not a JSON object";
  const r = record as Record<string, unknown>;
  if (typeof r.task_id !== "string" && typeof r.task_id !== "number") return "task_id must be a string";
  if (typeof r.task_id === "string" && r.task_id === "") return "task_id is empty";
  if (!isBinary(r.correct)) return `correct must be true, false, 0 or 1, got ${JSON.stringify(r.correct)}`;
  const run = r.eval_run;
  if (run !== undefined && run !== null && typeof run !== "string" && typeof run !== "number") {
    return `eval_run must be a string, got ${JSON.stringify(run)}`;
  }
  return null;
}

/** True for the values a boolean field may take in rows files: true, false, 0, 1. */
export function isBinary(v: unknown): v is boolean | 0 | 1 {
  return v === true || v === false || v === 0 || v === 1;
}

/** Returns the 0/1 value of a binary field. */
export function binaryValue(v: boolean | 0 | 1): 0 | 1 {
  return v === true || v === 1 ? 1 : 0;
}

/** True when the row was graded correct (`correct` true or 1): the one rule every table and statistic counts by. */
export function isCorrect(row: Pick<StatRow, "correct">): boolean {
  return row.correct === true || row.correct === 1;
}

/** Returns the row's task id as a string. */
export function taskIdOf(row: StatRow): string {
  return String(row.task_id);
}

/** Returns the row's eval run id as a string ("0" when the row names none). */
export function evalRunOf(row: StatRow): string {
  const run = row.eval_run as unknown;
  return run === undefined || run === null ? DEFAULT_EVAL_RUN : String(run);
}

/** Returns the group key of `row` for `field`: the value as text (numbers as JSON), or "(missing)" for absent, null or "". */
export function groupKeyOf(row: Record<string, unknown>, field: string): string {
  const v = row[field];
  if (v === undefined || v === null || v === "") return MISSING_GROUP;
  return typeof v === "string" ? v : JSON.stringify(v);
}

/** Orders ids as plain strings by UTF-16 code units (locale-independent, so identical everywhere). */
export function compareIds(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}

/** Orders eval run ids numerically when both are numbers ("2" before "10"), else as plain strings. */
export function compareRunIds(a: string, b: string): number {
  const na = Number(a);
  const nb = Number(b);
  const numeric = a.trim() !== "" && b.trim() !== "" && Number.isFinite(na) && Number.isFinite(nb);
  if (numeric && na !== nb) return na - nb;
  return compareIds(a, b);
}

/** The identity of a sample: (eval run, task, sample); null for a row without an integer sample index. */
export function sampleKeyOf(row: StatRow): string | null {
  return Number.isInteger(row.sample) ? JSON.stringify([evalRunOf(row), taskIdOf(row), row.sample]) : null;
}

/** What de-duplicating rows dropped. */
export interface Duplicates {
  /** Rows dropped because an earlier row had the same (eval run, task, sample). */
  count: number;
  /** Up to 3 of the repeated keys, as "task <id> sample <n> eval run <r>". */
  examples: string[];
}

function describeKey(row: StatRow): string {
  return `task ${taskIdOf(row)} sample ${row.sample} eval run ${evalRunOf(row)}`;
}

/**
 * Returns `rows` with every row whose (eval run, task, sample) repeats an earlier row's left out (the
 * first is kept, as the rows store keeps it), and what was dropped. Two copies of a sample are one
 * sample: counting both would weigh that task's outcome twice.
 */
export function dedupeRows<T extends StatRow>(rows: readonly T[]): { rows: T[]; duplicates: Duplicates } {
  const seen = new Set<string>();
  const kept: T[] = [];
  const duplicates: Duplicates = { count: 0, examples: [] };
  for (const row of rows) {
    const key = sampleKeyOf(row);
    if (key !== null && seen.has(key)) {
      duplicates.count++;
      if (duplicates.examples.length < 3) duplicates.examples.push(describeKey(row));
      continue;
    }
    if (key !== null) seen.add(key);
    kept.push(row);
  }
  return { rows: kept, duplicates };
}

/** The one line that says a rows file's duplicates were dropped. */
export function duplicatesNote(path: string, d: Duplicates): string {
  return `de-duplicated ${path}: dropped ${d.count} row(s) repeating an earlier (eval run, task, sample), the first of each kept (${d.examples.join("; ")}${d.count > d.examples.length ? "; ..." : ""})`;
}

/** Throws T2sError("duplicate_rows") when two rows share an (eval run, task, sample) key. */
export function assertNoDuplicates(rows: readonly StatRow[], source = "rows"): void {
  const { duplicates } = dedupeRows(rows);
  if (duplicates.count) {
    throw new T2sError(
      "duplicate_rows",
      `${source} hold ${duplicates.count} row(s) repeating an (eval run, task, sample) key (${duplicates.examples.join("; ")}); ` +
        `de-duplicate them first (dedupeRows, or read the file with readStatRows / readRows, which keep the first of each)`,
    );
  }
}

/** Correct and total samples of one task (over whichever rows were given). */
export interface TaskCounts {
  task_id: string;
  /** Samples. */
  n: number;
  /** Correct samples. */
  c: number;
}

/**
 * Returns one count per task id, sorted by id, pooling every row of the task (all its samples in all
 * eval runs). `value` picks what counts as a success (default: `correct`); rows for which it returns
 * null are left out. Rows repeating an (eval run, task, sample) key are refused (T2sError "duplicate_rows"):
 * every statistic rests on these counts, so none can count a sample twice.
 */
export function taskCounts(rows: readonly StatRow[], value: (row: StatRow) => 0 | 1 | null = (r) => binaryValue(r.correct)): TaskCounts[] {
  // setup errors are no samples, whichever way the rows came (a file, a rollout's result, a notebook)
  const graded = withoutSetupErrors(rows).rows;
  assertNoDuplicates(graded);
  const byTask = new Map<string, TaskCounts>();
  for (const row of graded) {
    const v = value(row);
    if (v === null) continue;
    const id = taskIdOf(row);
    let t = byTask.get(id);
    if (!t) byTask.set(id, (t = { task_id: id, n: 0, c: 0 }));
    t.n += 1;
    t.c += v;
  }
  return [...byTask.values()].sort((x, y) => compareIds(x.task_id, y.task_id));
}

/** Returns the distinct eval run ids of `rows`, sorted with compareRunIds. */
export function evalRuns(rows: readonly StatRow[]): string[] {
  return [...new Set(rows.map(evalRunOf))].sort(compareRunIds);
}

/** Returns the rows split by the group key of `field`, keys sorted. */
export function splitByGroup(rows: readonly StatRow[], field: string): Map<string, StatRow[]> {
  const groups = new Map<string, StatRow[]>();
  for (const row of rows) {
    const key = groupKeyOf(row, field);
    let list = groups.get(key);
    if (!list) groups.set(key, (list = []));
    list.push(row);
  }
  return new Map([...groups.entries()].sort((x, y) => compareIds(x[0], y[0])));
}

/** Throws a T2sError naming the first row that is not a usable stat row (by position in the list). */
export function validateRows(rows: readonly unknown[], source = "rows"): readonly StatRow[] {
  for (let i = 0; i < rows.length; i++) {
    const problem = rowProblem(rows[i]);
    if (problem) throw new T2sError("bad_row", `${source}[${i}]: ${problem}`);
  }
  return rows as readonly StatRow[];
}

/** What reading a rows file found. */
export interface RowsFile {
  rows: StatRow[];
  /** Lines skipped under skipBad: malformed JSON or not a usable row. */
  skipped: { line: number; message: string }[];
  /** The last line was cut off mid-write and ignored. */
  tornTail: boolean;
  /** Rows dropped because they repeat an earlier row's (eval run, task, sample): the first is kept. */
  duplicates: Duplicates;
  /** Setup-error rows (requests the server refused) left out: they are no samples. */
  setupErrors: SetupErrors;
}

/** Line numbers (1-based) of the records readJsonl returns for `text`, in order. */
function recordLines(text: string): number[] {
  const lines = text.split("\n");
  const out: number[] = [];
  for (let i = 0; i < lines.length; i++) {
    if (lines[i].trim() === "") continue;
    try {
      JSON.parse(lines[i]);
      out.push(i + 1);
    } catch {
      // malformed or torn: readJsonl returned no record for it
    }
  }
  return out;
}

/**
 * Reads and validates a rows file, de-duplicated (a row repeating an earlier (eval run, task, sample) is
 * dropped and counted in `duplicates`). A malformed line or a row without a usable task_id / correct throws
 * T2sError ("bad_jsonl" / "bad_row") naming file:line, unless `skipBad` is set: then such lines are
 * skipped and listed in `skipped`. Rows of different runs (mixedRuns) throw T2sError("mixed_runs") unless
 * `allowMixed`; `run` keeps only the rows of that run_id first.
 */
export function readStatRows(path: string, opts: { skipBad?: boolean; allowMixed?: boolean; run?: string } = {}): RowsFile {
  let content;
  try {
    content = readJsonl<unknown>(path, { skipBad: opts.skipBad });
  } catch (e) {
    if (e instanceof T2sError && e.code === "bad_jsonl") throw new T2sError("bad_jsonl", `${e.message} (use --skip-bad to skip such lines)`);
    throw e;
  }
  const skipped = content.bad.map((b) => ({ line: b.line, message: `malformed JSON (${b.message})` }));
  const rows: StatRow[] = [];
  let lines: number[] | null = null; // only worked out when a row is bad
  content.records.forEach((record, i) => {
    const problem = rowProblem(record);
    if (problem === null) {
      rows.push(record as StatRow);
      return;
    }
    lines ??= recordLines(readFileSync(path, "utf8"));
    const line = lines[i] ?? i + 1;
    if (!opts.skipBad) {
      throw new T2sError("bad_row", `${path}:${line}: ${problem} (use --skip-bad to skip such lines)`);
    }
    skipped.push({ line, message: problem });
  });
  skipped.sort((x, y) => x.line - y.line);
  for (const r of rows) if (typeof r.task_id === "number") r.task_id = String(r.task_id);
  // a setup error is left out before anything else: a later graded row of the same sample replaces it
  const graded = withoutSetupErrors(rows);
  const picked = opts.run !== undefined ? rowsOfRun(graded.rows, opts.run, path) : graded.rows;
  if (!opts.allowMixed) {
    const mixed = mixedRuns(picked);
    if (mixed) {
      throw new T2sError(
        "mixed_runs",
        `${path} holds rows of different runs (${mixed}); counted together they would be pooled or taken for duplicates of each other. ` +
          `Report each apart (t2s report --run <run_id>) or split the file by run_id.`,
      );
    }
  }
  const unique = dedupeRows(picked);
  return { rows: unique.rows, skipped, tornTail: content.tornTail, duplicates: unique.duplicates, setupErrors: graded.setupErrors };
}

/**
 * Reads a rows file for a statistic, the band of a run included: readStatRows (validated, de-duplicated,
 * mixed runs refused), refusing a missing file ("not_found") and one with no rows ("no_rows"). What the
 * caller must tell the user (duplicates dropped, lines skipped, a cut-off last line) is in readingNotes.
 */
export function loadStatRows(path: string, opts: { skipBad?: boolean; allowMixed?: boolean; run?: string } = {}): RowsFile {
  if (!existsSync(path)) throw new T2sError("not_found", `rows file ${path} does not exist`);
  const file = readStatRows(path, opts);
  if (file.rows.length === 0) {
    if (file.setupErrors.count) throw new T2sError("no_rows", `${path} has no graded rows to report on: ${setupErrorsNote(path, file.setupErrors).replace(`${path}: `, "")}`);
    const left = file.skipped.length ? ` (all ${file.skipped.length} line(s) were bad and skipped)` : file.tornTail ? " (only a cut-off last line)" : "";
    throw new T2sError("no_rows", `${path} has no rows${left}`);
  }
  return file;
}

/**
 * The lines that say what reading `path` left out of the numbers, empty when nothing was: lines skipped
 * under skipBad (the first 5 named), a cut-off last line and, unless `duplicates` is false (a caller that
 * prints duplicatesNote itself), the duplicates dropped.
 */
export function readingNotes(path: string, file: RowsFile, opts: { duplicates?: boolean; setupErrors?: boolean } = {}): string[] {
  const notes: string[] = [];
  if (file.skipped.length) {
    const shown = file.skipped.slice(0, 5).map((s) => `${path}:${s.line}: ${s.message}`);
    const more = file.skipped.length > 5 ? `\n  ... and ${file.skipped.length - 5} more` : "";
    notes.push(`warning: skipped ${file.skipped.length} bad line(s):\n  ${shown.join("\n  ")}${more}`);
  }
  if (file.tornTail) notes.push(`warning: ${path}: ignored a cut-off last line (a writer was interrupted)`);
  if (opts.duplicates !== false && file.duplicates.count) notes.push(duplicatesNote(path, file.duplicates));
  if (opts.setupErrors !== false && file.setupErrors.count) notes.push(setupErrorsNote(path, file.setupErrors));
  return notes;
}

const text = (v: unknown): string => (v === undefined || v === null ? "none" : String(v));

/**
 * Says how `rows` mix runs that must not be counted together, or returns null when they do not:
 * within one eval run, rows of another policy, model or adapter, or one (task, sample) drawn by two runs
 * (run_id); across eval runs, another model or adapter (replications of one model may come from other
 * servers, so their policy strings and run ids may differ). Repeats within one run are resume duplicates,
 * not a mix.
 */
export function mixedRuns(rows: readonly StatRow[]): string | null {
  const setupOf = (r: StatRow) => `model ${text(r.model)}, adapter ${text(r.adapter)}`;
  const setups = new Set(rows.map(setupOf));
  if (setups.size > 1) return `${[...setups].sort().slice(0, 3).join("; ")}${setups.size > 3 ? "; ..." : ""}`;
  const policyOf = new Map<string, string>();
  const runOf = new Map<string, string>();
  for (const r of rows) {
    const run = evalRunOf(r);
    const policy = text(r.policy);
    const seen = policyOf.get(run);
    if (seen === undefined) policyOf.set(run, policy);
    else if (seen !== policy) return `eval run ${run}: policy ${seen} and ${policy}`;
    if (!Number.isInteger(r.sample)) continue;
    const key = JSON.stringify([run, taskIdOf(r), r.sample]);
    const id = text(r.run_id);
    const first = runOf.get(key);
    if (first === undefined) runOf.set(key, id);
    else if (first !== id) return `eval run ${run}: task ${taskIdOf(r)} sample ${r.sample} drawn by run_id ${first} and ${id}`;
  }
  return null;
}

/** Keeps the rows of one run (`run_id`), refusing an id no row has. */
export function rowsOfRun<T extends StatRow>(rows: readonly T[], runId: string, source = "rows"): T[] {
  const kept = rows.filter((r) => text(r.run_id) === runId);
  if (kept.length === 0) {
    const ids = [...new Set(rows.map((r) => text(r.run_id)))].sort();
    throw new T2sError("no_rows", `${source} has no rows of run_id ${runId}; its run ids: ${ids.slice(0, 10).join(", ")}${ids.length > 10 ? ", ..." : ""}`);
  }
  return kept;
}
