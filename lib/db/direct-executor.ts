/**
 * The executor the task tools run gold queries through: the kit's worker-process pool (hard timeouts,
 * read-only). DirectExecutor is an in-process alternative for callers that cannot spawn processes: the
 * same statement allow-list and result typing as the pool's workers (lib/db/run.ts), without the hard timeout.
 */
import { RESULT_ROWS } from "../core/defaults.js";
import { T2sError } from "../core/errors.js";
import { ConnectionCache } from "./connection.js";
import { ExecutorPool } from "./pool.js";
import { DEFAULT_MAX_RESULT_BYTES, runQuery } from "./run.js";
import type { ExecOptions, ExecOutcome, Executor } from "./types.js";

/** Runs statements in-process on read-only connections (no hard timeout: fine for trusted gold SQL). */
export class DirectExecutor implements Executor {
  private readonly cache = new ConnectionCache();

  async execute(dbPath: string, sql: string, options: ExecOptions = {}): Promise<ExecOutcome> {
    // a query runs to its end here once started; a cancelled caller only keeps it from starting
    if (options.signal?.aborted) throw new T2sError("cancelled", "the query was cancelled: whoever asked for it went away");
    return runQuery(this.cache, dbPath, sql, { maxRows: options.maxRows ?? RESULT_ROWS, maxResultBytes: DEFAULT_MAX_RESULT_BYTES, dialect: options.dialect });
  }

  async close(): Promise<void> {
    this.cache.close();
  }
}

/** The executor task verification uses by default: an ExecutorPool (close it when done). */
export async function createExecutorPool(opts: { workers?: number } = {}): Promise<Executor> {
  return new ExecutorPool({ workers: opts.workers });
}
