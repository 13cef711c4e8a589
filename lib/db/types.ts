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
  /** Cancels the query when aborted: dropped from the queue, or its worker killed if it runs (the call rejects with T2sError("cancelled")). */
  signal?: AbortSignal;
}

/** Something that runs one read-only statement against a SQLite file. */
export interface Executor {
  execute(dbPath: string, sql: string, options?: ExecOptions): Promise<ExecOutcome>;
  close(): Promise<void>;
}

/** How an ExecutorPool (lib/db/pool.ts) runs its worker processes. */
export interface ExecutorPoolOptions {
  /** Worker processes; default the number of CPUs. */
  workers?: number;
  /** Memory ceiling per worker in MB (resident memory, checked while a query runs); default 1024. */
  memoryLimitMb?: number;
  /** Largest result accepted, in bytes of values; larger results fail with `too_large`. Default 16 MiB. */
  maxResultBytes?: number;
  /**
   * Extra started-and-idle workers kept ready (default 1), so a query queued behind a killed runaway starts
   * at once instead of waiting the ~0.5-1.5 s a new worker needs to start. At most `workers` run at a time,
   * except for a query that waited a quarter of its timeout for a lane: it gets an extra worker (up to 4 x
   * `workers` processes), so runaways cannot hold a normal query back by more than one timeout.
   */
  spareWorkers?: number;
  /** Start the workers at the first query instead of at once (a command that may get no query, such as
   * `t2s grade --jsonl` on empty input, then exits without starting any). Default false. */
  startOnDemand?: boolean;
}

export interface PoolStats {
  workers: number;
  busy: number;
  queued: number;
  completed: number;
  timeouts: number;
  memoryKills: number;
  crashes: number;
  restarts: number;
  /** Queries run again on a fresh worker because their worker died or failed under them. */
  infraRetries: number;
  /** Calls rejected with `infra_error` after INFRA_RETRIES such retries. */
  infraErrors: number;
}
