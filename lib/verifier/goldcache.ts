/**
 * Gold results, computed once per (database content hash, gold SQL, row cap) and kept in an in-memory LRU.
 * The content hash covers every byte that defines the database (lib/db/dbstate.ts); a live database (pages
 * in its -wal file) is not cached at all, and a result read while the files changed is not kept.
 * The cache stores the pending promise, so concurrent grades of one task run its gold once; failures of the
 * SQL are cached too (a gold that failed fails again without re-running). What says more about the machine
 * than about the query is never kept: a rejected call (the executor itself failed: `infra_error` after its
 * retries, a closed pool) and a timeout (a busy machine can cause one) are forgotten, so the next call runs
 * the query again.
 */
import { T2sError } from "../core/errors.js";
import { databaseHash, databaseState, unchangedSince, type DatabaseState } from "../db/dbstate.js";
import type { Dialect } from "../db/dialect.js";
import type { ExecOptions, ExecOutcome, Executor } from "../db/types.js";

/** What a query for grading runs with: its limits, and the signal of whoever waits for it. */
export type QueryOptions = Required<Pick<ExecOptions, "timeoutMs" | "maxRows" | "dialect">> & Pick<ExecOptions, "signal">;

/** A cached (or pending) outcome and who waits for it. */
interface Entry {
  outcome: Promise<ExecOutcome>;
  /** Cancels the run once every waiter has gone away. */
  controller: AbortController;
  /** Waiters with a signal that have not gone away. */
  waiters: number;
  /** A waiter without a signal (it never goes away): the run is never cancelled. */
  pinned: boolean;
  settled: boolean;
}

const cancelled = () => new T2sError("cancelled", "the grade was cancelled: whoever asked for it went away");

/**
 * An LRU map from gold keys to (pending) gold outcomes. A pending run is shared by every caller that asks
 * for its key meanwhile, so it is cancelled only when all of them have gone away (each caller's signal);
 * one caller leaving gets its own rejection at once and leaves the others' run alone.
 */
export class GoldCache {
  readonly capacity: number;
  private readonly map = new Map<string, Entry>();
  hits = 0;
  misses = 0;

  constructor(capacity = 4096) {
    if (!Number.isInteger(capacity) || capacity < 1) throw new T2sError("bad_cache", `gold cache capacity must be an integer >= 1, got ${capacity}`);
    this.capacity = capacity;
  }

  /**
   * Returns the cached outcome for `key`, or runs `compute` once and caches it; with `stillValid`, the
   * outcome is kept only if that still holds when it arrives. With `signal`, this caller's promise rejects
   * with `cancelled` when it aborts, and `compute`'s signal aborts when no caller is left.
   */
  getOrRun(key: string, compute: (signal: AbortSignal) => Promise<ExecOutcome>, opts: { stillValid?: () => boolean; signal?: AbortSignal } = {}): Promise<ExecOutcome> {
    if (opts.signal?.aborted) return Promise.reject(cancelled());
    let entry = this.map.get(key);
    if (entry) {
      this.hits++;
      this.map.delete(key);
      this.map.set(key, entry);
    } else {
      this.misses++;
      const controller = new AbortController();
      const e: Entry = { outcome: compute(controller.signal), controller, waiters: 0, pinned: false, settled: false };
      const drop = () => {
        if (this.map.get(key) === e) this.map.delete(key);
      };
      e.outcome.then(
        (out) => {
          e.settled = true;
          if ((out.ok === false && out.error.kind === "timeout") || (opts.stillValid && !opts.stillValid())) drop();
        },
        () => {
          e.settled = true;
          drop();
        },
      );
      this.map.set(key, e);
      while (this.map.size > this.capacity) this.map.delete(this.map.keys().next().value as string);
      entry = e;
    }
    return this.wait(key, entry, opts.signal);
  }

  /** The entry's outcome for one caller, who may go away (its signal). */
  private wait(key: string, e: Entry, signal: AbortSignal | undefined): Promise<ExecOutcome> {
    if (e.settled) return e.outcome;
    if (!signal) {
      e.pinned = true;
      return e.outcome;
    }
    e.waiters++;
    return new Promise((resolve, reject) => {
      const leave = () => {
        reject(cancelled());
        e.waiters--;
        if (e.waiters === 0 && !e.pinned && !e.settled) {
          // nobody waits for it: stop the run, and let the next caller start afresh
          if (this.map.get(key) === e) this.map.delete(key);
          e.controller.abort();
        }
      };
      signal.addEventListener("abort", leave, { once: true });
      e.outcome.then(
        (out) => {
          signal.removeEventListener("abort", leave);
          resolve(out);
        },
        (err: unknown) => {
          signal.removeEventListener("abort", leave);
          reject(err);
        },
      );
    });
  }

  /** Drops one entry. */
  forget(key: string): void {
    this.map.delete(key);
  }

  /** Number of cached entries. */
  get size(): number {
    return this.map.size;
  }

  /** Drops every entry and zeroes the counters. */
  clear(): void {
    this.map.clear();
    this.hits = this.misses = 0;
  }
}

/** The cache grade() uses unless given another one. */
export const sharedGoldCache = new GoldCache();

/** Where a cached result holds: the database's content hash, and the state it was taken at. */
export interface DatabaseKey {
  sha: string;
  state: DatabaseState;
}

/**
 * The key results on `dbPath` are cached under, or null when the database is live (committed pages sit in
 * its -wal file): a writer may commit between any two reads, so nothing read from it is cached. Throws
 * T2sError("no_database") when there is no file.
 */
export async function databaseKey(dbPath: string): Promise<DatabaseKey | null> {
  const state = databaseState(dbPath);
  if (state.live) return null;
  return { sha: await databaseHash(state), state };
}

/** The cache key of a gold result. */
export function goldKey(dbSha: string, goldSql: string, maxRows: number, dialect: Dialect | undefined = "sqlite"): string {
  return `${dbSha}\u0000${maxRows}\u0000${dialect ?? "sqlite"}\u0000${goldSql}`;
}

/**
 * Runs `sql` on the database, or recalls its result: kept only when the database's files did not change
 * between taking its key and the answer (a result read across a write is not the key's).
 */
async function cachedRun(executor: Executor, dbPath: string, sql: string, exec: QueryOptions, cache: GoldCache, db: DatabaseKey | null | undefined): Promise<ExecOutcome> {
  const key = db === undefined ? await databaseKey(dbPath) : db;
  if (key === null) return executor.execute(dbPath, sql, exec);
  const { signal, ...limits } = exec;
  return cache.getOrRun(goldKey(key.sha, sql, exec.maxRows, exec.dialect), (shared) => executor.execute(dbPath, sql, { ...limits, signal: shared }), { stillValid: () => unchangedSince(key.state), signal });
}

/**
 * Runs (or recalls) the gold query; returns the raw outcome (a failure is the caller's to report).
 * `db`: the database's cache key when the caller already has it (one grade hashes its database once).
 */
export function goldOutcome(executor: Executor, dbPath: string, goldSql: string, exec: QueryOptions, cache: GoldCache | false, db?: DatabaseKey | null): Promise<ExecOutcome> {
  if (cache === false) return executor.execute(dbPath, goldSql, exec);
  return cachedRun(executor, dbPath, goldSql, exec, cache, db);
}

/** Functions whose result changes from run to run: a query calling one is never answered from the cache. */
const VOLATILE = /\b(random|randomblob|changes|total_changes|last_insert_rowid)\s*\(|\b(now|current_date|current_time|current_timestamp|localtime)\b/i;

/**
 * Runs a candidate query, or recalls its result when the same text already ran on the same database
 * content with the same limits (as a gold or as another candidate). A timeout is never kept (GoldCache).
 */
export function candidateOutcome(executor: Executor, dbPath: string, sql: string, exec: QueryOptions, cache: GoldCache | false, db?: DatabaseKey | null): Promise<ExecOutcome> {
  if (cache === false || VOLATILE.test(sql)) return executor.execute(dbPath, sql, exec);
  return cachedRun(executor, dbPath, sql, exec, cache, db);
}
