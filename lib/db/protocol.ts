/**
 * Messages between the executor pool and its worker processes, over Node's IPC channel with the "advanced"
 * (structured clone) serialization, so values JSON cannot carry (Infinity from SQLite REAL overflow) survive.
 */
import type { Dialect } from "./dialect.js";
import type { ExecOutcome } from "./types.js";

export interface RunRequest {
  id: number;
  dbPath: string;
  sql: string;
  maxRows: number;
  maxResultBytes: number;
  dialect?: Dialect;
  /** The path was marked exact in the pool's process: open exactly it, verified (lib/db/exact.ts). */
  exactPath?: boolean;
  /** The worker kills itself this long (plus a grace period) after starting, should the pool not manage to. */
  timeoutMs: number;
}

export interface RunReply {
  id: number;
  outcome: ExecOutcome;
  /** Set when the worker failed rather than the query (an internal error, a database that kept changing
   * under an unlocked read): the pool runs the query again on a fresh worker, never reports `outcome`. */
  infra?: string;
}

/** Sent once by a worker when it can take requests. */
export interface ReadyMessage {
  ready: true;
  pid: number;
}

export type WorkerMessage = RunReply | ReadyMessage;
