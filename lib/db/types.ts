/**
 * The contract of SQL execution shared by the tool, the grader and the task verifier.
 * Values keep SQLite's storage classes: INTEGER and REAL as JS numbers (an INTEGER outside +-(2^53 - 1) as a
 * bigint, so that distinct integers never become one number), TEXT as strings, NULL as null,
 * BLOB as `{ blob: "<lowercase hex>" }` so that bytes never compare equal to text.
 */
import type { Dialect } from "./dialect.js";

export type SqlValue = number | bigint | string | null | { blob: string };

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
  /** How the SQL is read (lib/db/dialect.ts): "sqlite" as written (default), "spider" as the Spider and
   * BIRD evaluators run it (double-quoted strings, "! =" normalised). */
  dialect?: Dialect;
}

/** Something that runs one read-only statement against a SQLite file. */
export interface Executor {
  execute(dbPath: string, sql: string, options?: ExecOptions): Promise<ExecOutcome>;
  close(): Promise<void>;
}
