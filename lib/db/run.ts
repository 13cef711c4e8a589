/**
 * Runs one statement on a read-only connection inside the current process: allow-list checks, row cap,
 * result-size cap, typed values. The pool calls this inside its worker processes, where a runaway can be
 * killed; calling it directly has no timeout.
 */
import type Database from "better-sqlite3";
import { performance } from "node:perf_hooks";
import { ConnectionCache, ConnectionError, currentSignature, type CachedConnection } from "./connection.js";
import { checkPrepared, checkSqlText } from "./allowlist.js";
import { doubleQuotedToString, MAX_DQS_REWRITES, normalizeForDialect, unresolvedDoubleQuoted, type Dialect } from "./dialect.js";
import type { ExecError, ExecOutcome, SqlValue } from "./types.js";

export interface RunLimits {
  maxRows: number;
  /** How the SQL is read (lib/db/dialect.ts); default "sqlite". */
  dialect?: Dialect;
  /** Upper bound on the result's size (text characters, 2 per blob byte, 8 per number). */
  maxResultBytes: number;
  /** Open exactly this path, verified (lib/db/exact.ts); default: whether this process marked it exact. */
  exactPath?: boolean;
}

/** Default cap on a result's size: far above any useful tool output or grading result. */
export const DEFAULT_MAX_RESULT_BYTES = 16 * 1024 * 1024;

function sqliteCode(e: unknown): string {
  return typeof (e as { code?: unknown }).code === "string" ? (e as { code: string }).code : "";
}

/** Maps a driver error to the kit's error kinds; `phase` says whether SQLite was compiling or running. */
export function classifyError(e: unknown, phase: "prepare" | "run"): ExecError {
  const message = e instanceof Error ? e.message : String(e);
  const code = sqliteCode(e);
  if (/more than one statement/i.test(message)) return { kind: "unsafe", message: "more than one statement: only one read-only query may run" };
  if (/contains no statements/i.test(message)) return { kind: "syntax", message: "no SQL statement was given" };
  if (code.startsWith("SQLITE_TOOBIG") || /string or blob too big/i.test(message)) return { kind: "too_large", message };
  if (code.startsWith("SQLITE_NOMEM") || /out of memory/i.test(message)) return { kind: "too_large", message: `${message} (the query needs too much memory)` };
  if (code.startsWith("SQLITE_AUTH") || /not authorized|unsafe use of/i.test(message)) return { kind: "unsafe", message };
  if (code.startsWith("SQLITE_READONLY") || /readonly database|query_only/i.test(message)) return { kind: "unsafe", message };
  if (code.startsWith("SQLITE_NOTADB") || code.startsWith("SQLITE_CANTOPEN")) return { kind: "no_database", message };
  if (e instanceof RangeError || e instanceof TypeError) return { kind: phase === "prepare" ? "syntax" : "runtime", message };
  return { kind: phase === "prepare" ? "syntax" : "runtime", message };
}

function sizeOf(v: unknown): number {
  if (typeof v === "string") return v.length + 2;
  if (v === null || v === undefined) return 4;
  if (Buffer.isBuffer(v)) return v.length * 2 + 10;
  return 8;
}

const MAX_SAFE = BigInt(Number.MAX_SAFE_INTEGER);

/** In safe-integer mode INTEGERs arrive as bigints; only those beyond 2^53 stay bigints. */
function toSqlValue(v: unknown): SqlValue {
  if (v === null || v === undefined) return null;
  if (typeof v === "number" || typeof v === "string") return v;
  if (typeof v === "bigint") return v <= MAX_SAFE && v >= -MAX_SAFE ? Number(v) : v;
  if (Buffer.isBuffer(v)) return { blob: v.toString("hex") };
  return String(v);
}

/** Prepares `sql` as the dialect reads it (see dialect.ts for the double-quoted string rewrites). */
function prepareIn(db: Database.Database, sql: string, dialect: Dialect | undefined): { stmt: Database.Statement; sql: string } {
  let text = normalizeForDialect(sql, dialect);
  for (let tries = 0; ; tries++) {
    try {
      return { stmt: db.prepare(text), sql: text };
    } catch (e) {
      const name = dialect === "spider" && tries < MAX_DQS_REWRITES ? unresolvedDoubleQuoted((e as Error).message) : null;
      const next = name === null ? null : doubleQuotedToString(text, name);
      if (next === null) throw e;
      text = next;
    }
  }
}

function prepareChecked(cache: ConnectionCache, dbPath: string, sql: string, dialect: Dialect | undefined, exact: boolean | undefined): { stmt: Database.Statement; conn: CachedConnection } | { error: ExecError } {
  const textError = checkSqlText(sql);
  if (textError) return { error: textError };
  let conn;
  try {
    conn = cache.get(dbPath, exact);
  } catch (e) {
    if (e instanceof ConnectionError) return { error: e.error };
    throw e;
  }
  const key = dialect === "spider" ? `spider\u0000${sql}` : sql;
  const cached = conn.statements.get(key);
  if (cached) return { stmt: cached, conn };
  let stmt: Database.Statement;
  let text: string;
  try {
    ({ stmt, sql: text } = prepareIn(conn.db, sql, dialect));
  } catch (e) {
    return { error: classifyError(e, "prepare") };
  }
  let policyError: ExecError | null;
  try {
    policyError = checkPrepared(conn.db, stmt, text, conn.schemaRunsCode);
  } catch (e) {
    return { error: classifyError(e, "prepare") };
  }
  if (policyError) return { error: policyError };
  stmt.raw(true);
  cache.remember(conn, key, stmt);
  return { stmt, conn };
}

/** Reads of a database opened without locks tried, when its files keep changing under them, before giving up. */
const UNLOCKED_READS = 3;

/** Thrown when a database opened without locks changed under every read: a failure of the read, not of the query. */
export class DatabaseMovedError extends Error {}

/** True for a number that may be an INTEGER beyond 2^53 rounded to a double (a whole number that is not safe). */
const maybeRounded = (v: unknown) => typeof v === "number" && Number.isInteger(v) && !Number.isSafeInteger(v);

/**
 * Runs `sql` against `dbPath` through `cache`; returns rows or a typed error, never throws for bad SQL.
 * Rows are read with plain numbers (a bigint per INTEGER would cost an allocation per value); only when a
 * whole number beyond 2^53 shows up is the statement read again in safe-integer mode, so that such
 * INTEGERs come back exact (as bigints).
 */
export function runQuery(cache: ConnectionCache, dbPath: string, sql: string, limits: RunLimits): ExecOutcome {
  const t0 = performance.now();
  try {
    for (let attempt = 1; ; attempt++) {
      const prepared = prepareChecked(cache, dbPath, sql, limits.dialect, limits.exactPath);
      if ("error" in prepared) return { ok: false, error: prepared.error };
      const first = readRows(prepared.stmt, limits, false);
      const out = first.ok && first.rounded ? readRows(prepared.stmt, limits, true) : first;
      // without locks a writer may have changed the files mid-read (a torn read can even look "malformed"):
      // the answer, rows or error, holds only if they are as they were when the connection was opened
      const mode = prepared.conn.mode;
      if ((mode === "private" || mode === "immutable") && currentSignature(dbPath) !== prepared.conn.signature) {
        cache.drop(dbPath);
        if (attempt < UNLOCKED_READS) continue;
        throw new DatabaseMovedError(`${dbPath} changed during each of ${UNLOCKED_READS} reads made without locks (a writer that uses no -shm file?)`);
      }
      if (out.ok === false) return out;
      const elapsedMs = Math.round((performance.now() - t0) * 100) / 100;
      return { ok: true, columns: out.columns, rows: out.rows, elapsedMs, truncated: out.truncated };
    }
  } finally {
    cache.releaseLive(dbPath);
  }
}

function readRows(stmt: Database.Statement, limits: RunLimits, safe: boolean): { ok: true; columns: string[]; rows: SqlValue[][]; truncated: boolean; rounded: boolean } | { ok: false; error: ExecError } {
  stmt.safeIntegers(safe);
  try {
    return readAll(stmt, limits);
  } finally {
    if (safe) stmt.safeIntegers(false);
  }
}

function readAll(stmt: Database.Statement, limits: RunLimits): { ok: true; columns: string[]; rows: SqlValue[][]; truncated: boolean; rounded: boolean } | { ok: false; error: ExecError } {
  let rounded = false;
  const rows: SqlValue[][] = [];
  let truncated = false;
  let bytes = 0;
  let columns: string[];
  try {
    columns = stmt.columns().map((c) => c.name);
    for (const raw of stmt.iterate() as IterableIterator<unknown[]>) {
      if (rows.length >= limits.maxRows) {
        truncated = true;
        break; // leaving the loop resets the statement
      }
      let rowBytes = 0;
      for (const v of raw) rowBytes += sizeOf(v);
      bytes += rowBytes;
      if (bytes > limits.maxResultBytes) {
        return {
          ok: false,
          error: { kind: "too_large", message: `the result exceeds ${limits.maxResultBytes} bytes after ${rows.length} rows; select fewer or shorter values` },
        };
      }
      if (!rounded && raw.some(maybeRounded)) rounded = true;
      rows.push(raw.map(toSqlValue));
    }
  } catch (e) {
    return { ok: false, error: classifyError(e, "run") };
  }
  return { ok: true, columns, rows, truncated, rounded };
}
