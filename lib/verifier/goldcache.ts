/**
 * Gold results, computed once per (database content hash, gold SQL, row cap) and kept in an in-memory LRU.
 * The cache stores the pending promise, so concurrent grades of one task run its gold once; failures of the
 * SQL are cached too (a gold that failed fails again without re-running). What says more about the machine
 * than about the query is never kept: a rejected call (the executor itself failed: `infra_error` after its
 * retries, a closed pool) and a timeout (a busy machine can cause one) are forgotten, so the next call runs
 * the query again.
 */
import { createHash } from "node:crypto";
import { readFileSync, statSync } from "node:fs";
import { resolve } from "node:path";
import { T2sError } from "../core/errors.js";
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

  /** Returns the cached outcome for `key`, or runs `compute` once and caches it. */
  getOrRun(key: string, compute: () => Promise<ExecOutcome>): Promise<ExecOutcome> {
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
      if (out.ok === false && out.error.kind === "timeout") drop();
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

const hashMemo = new Map<string, { sig: string; sha: string }>();

/**
 * Returns the sha256 of a database file's bytes, remembered per path until the file's size, mtime or
 * inode changes (so a grade does not re-read the file). Throws T2sError("no_database") for a missing file.
 */
export function databaseHash(dbPath: string): string {
  const path = resolve(dbPath);
  let sig: string;
  try {
    const st = statSync(path);
    if (!st.isFile()) throw new Error("not a file");
    sig = `${st.dev}:${st.ino}:${st.size}:${st.mtimeMs}`;
  } catch (e) {
    throw new T2sError("no_database", `no database file at ${path} (${(e as Error).message})`);
  }
  const memo = hashMemo.get(path);
  if (memo && memo.sig === sig) return memo.sha;
  const sha = createHash("sha256").update(readFileSync(path)).digest("hex");
  hashMemo.set(path, { sig, sha });
  return sha;
}

/** The cache key of a gold result. */
export function goldKey(dbSha: string, goldSql: string, maxRows: number, dialect: Dialect | undefined = "sqlite"): string {
  return `${dbSha}\u0000${maxRows}\u0000${dialect ?? "sqlite"}\u0000${goldSql}`;
}

/**
 * Runs (or recalls) the gold query; returns the raw outcome (a failure is the caller's to report).
 * `dbSha`: the database's hash when the caller already has it (one grade hashes its database once).
 */
export function goldOutcome(executor: Executor, dbPath: string, goldSql: string, exec: Required<ExecOptions>, cache: GoldCache | false, dbSha?: string): Promise<ExecOutcome> {
  const run = () => executor.execute(dbPath, goldSql, exec);
  if (cache === false) return run();
  return cache.getOrRun(goldKey(dbSha ?? databaseHash(dbPath), goldSql, exec.maxRows, exec.dialect), run);
}

/** Functions whose result changes from run to run: a query calling one is never answered from the cache. */
const VOLATILE = /\b(random|randomblob|changes|total_changes|last_insert_rowid)\s*\(|\b(now|current_date|current_time|current_timestamp|localtime)\b/i;

/**
 * Runs a candidate query, or recalls its result when the same text already ran on the same database
 * content with the same limits (as a gold or as another candidate). A timeout is never kept (GoldCache).
 */
export async function candidateOutcome(executor: Executor, dbPath: string, sql: string, exec: Required<ExecOptions>, cache: GoldCache | false, dbSha?: string): Promise<ExecOutcome> {
  if (cache === false || VOLATILE.test(sql)) return executor.execute(dbPath, sql, exec);
  const key = goldKey(dbSha ?? databaseHash(dbPath), sql, exec.maxRows, exec.dialect);
  return cache.getOrRun(key, () => executor.execute(dbPath, sql, exec));
}
