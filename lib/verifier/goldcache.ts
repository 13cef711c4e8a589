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

/** An LRU map from gold keys to (pending) gold outcomes. */
export class GoldCache {
  readonly capacity: number;
  private readonly map = new Map<string, Promise<ExecOutcome>>();
  hits = 0;
  misses = 0;

  constructor(capacity = 4096) {
    if (!Number.isInteger(capacity) || capacity < 1) throw new T2sError("bad_cache", `gold cache capacity must be an integer >= 1, got ${capacity}`);
    this.capacity = capacity;
  }

  /**
   * Returns the cached outcome for `key`, or runs `compute` once and caches it; with `stillValid`, the
   * outcome is kept only if that still holds when it arrives.
   */
  getOrRun(key: string, compute: () => Promise<ExecOutcome>, stillValid?: () => boolean): Promise<ExecOutcome> {
    const hit = this.map.get(key);
    if (hit) {
      this.hits++;
      this.map.delete(key);
      this.map.set(key, hit);
      return hit;
    }
    this.misses++;
    const p = compute();
    this.map.set(key, p);
    const drop = () => {
      if (this.map.get(key) === p) this.map.delete(key);
    };
    p.then((out) => {
      if ((out.ok === false && out.error.kind === "timeout") || (stillValid && !stillValid())) drop();
    }, drop);
    while (this.map.size > this.capacity) this.map.delete(this.map.keys().next().value as string);
    return p;
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
async function cachedRun(executor: Executor, dbPath: string, sql: string, exec: Required<ExecOptions>, cache: GoldCache, db: DatabaseKey | null | undefined): Promise<ExecOutcome> {
  const key = db === undefined ? await databaseKey(dbPath) : db;
  const run = () => executor.execute(dbPath, sql, exec);
  if (key === null) return run();
  return cache.getOrRun(goldKey(key.sha, sql, exec.maxRows, exec.dialect), run, () => unchangedSince(key.state));
}

/**
 * Runs (or recalls) the gold query; returns the raw outcome (a failure is the caller's to report).
 * `db`: the database's cache key when the caller already has it (one grade hashes its database once).
 */
export function goldOutcome(executor: Executor, dbPath: string, goldSql: string, exec: Required<ExecOptions>, cache: GoldCache | false, db?: DatabaseKey | null): Promise<ExecOutcome> {
  if (cache === false) return executor.execute(dbPath, goldSql, exec);
  return cachedRun(executor, dbPath, goldSql, exec, cache, db);
}

/** Functions whose result changes from run to run: a query calling one is never answered from the cache. */
const VOLATILE = /\b(random|randomblob|changes|total_changes|last_insert_rowid)\s*\(|\b(now|current_date|current_time|current_timestamp|localtime)\b/i;

/**
 * Runs a candidate query, or recalls its result when the same text already ran on the same database
 * content with the same limits (as a gold or as another candidate). A timeout is never kept (GoldCache).
 */
export function candidateOutcome(executor: Executor, dbPath: string, sql: string, exec: Required<ExecOptions>, cache: GoldCache | false, db?: DatabaseKey | null): Promise<ExecOutcome> {
  if (cache === false || VOLATILE.test(sql)) return executor.execute(dbPath, sql, exec);
  return cachedRun(executor, dbPath, sql, exec, cache, db);
}
