/**
 * The contract of SQL execution shared by the tool, the grader and the task verifier.
 * Values keep SQLite's storage classes: INTEGER and REAL as JS numbers, TEXT as strings, NULL as null,
 * BLOB as `{ blob: "<lowercase hex>" }` so that bytes never compare equal to text.
 */
export type SqlValue = number | string | null | { blob: string };

/** Why a statement gave no rows. */
export type ExecErrorKind = "syntax" | "runtime" | "unsafe" | "timeout" | "too_large" | "no_database";

export interface ExecError {
  kind: ExecErrorKind;
  message: string;
}

export interface ExecSuccess {
  ok: true;
  columns: string[];
  rows: SqlValue[][];
  elapsedMs: number;
  /** More rows existed than `maxRows`; `rows` holds the first `maxRows`. */
  truncated: boolean;
}

export interface ExecFailure {
  ok: false;
  error: ExecError;
}

export type ExecOutcome = ExecSuccess | ExecFailure;

export interface ExecOptions {
  /** Wall-clock limit; on expiry the worker running the query is killed. Default 5000 ms. */
  timeoutMs?: number;
  /** Row cap; rows beyond it set `truncated`. Default 200. */
  maxRows?: number;
}

/** Something that runs one read-only statement against a SQLite file. */
export interface Executor {
  execute(dbPath: string, sql: string, options?: ExecOptions): Promise<ExecOutcome>;
  close(): Promise<void>;
}
