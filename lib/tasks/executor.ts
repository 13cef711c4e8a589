/**
 * The executor the task tools run gold queries through: the kit's worker-process pool (hard timeouts,
 * read-only). DirectExecutor is an in-process alternative for callers that cannot spawn processes.
 */
import Database from "better-sqlite3";
import { existsSync } from "node:fs";
import { ExecutorPool } from "../db/pool.js";
import type { ExecOptions, ExecOutcome, Executor, SqlValue } from "../db/types.js";

function toSqlValue(v: unknown): SqlValue {
  if (v === null || v === undefined) return null;
  if (typeof v === "number" || typeof v === "string") return v;
  if (typeof v === "bigint") return Number(v);
  if (Buffer.isBuffer(v)) return { blob: v.toString("hex") };
  return String(v);
}

/** Runs statements in-process on read-only connections (no hard timeout: fine for trusted gold SQL). */
export class DirectExecutor implements Executor {
  private readonly dbs = new Map<string, Database.Database>();

  async execute(dbPath: string, sql: string, options: ExecOptions = {}): Promise<ExecOutcome> {
    const maxRows = options.maxRows ?? 200;
    if (!existsSync(dbPath)) return { ok: false, error: { kind: "no_database", message: `no database at ${dbPath}` } };
    let db = this.dbs.get(dbPath);
    if (!db) {
      db = new Database(dbPath, { readonly: true, fileMustExist: true });
      this.dbs.set(dbPath, db);
    }
    const t0 = performance.now();
    try {
      const stmt = db.prepare(sql);
      if (!stmt.reader) return { ok: false, error: { kind: "unsafe", message: "not a query that returns rows" } };
      if (!stmt.readonly) return { ok: false, error: { kind: "unsafe", message: "statement writes" } };
      stmt.raw(true);
      const columns = stmt.columns().map((c) => c.name);
      const rows: SqlValue[][] = [];
      let truncated = false;
      for (const row of stmt.iterate() as IterableIterator<unknown[]>) {
        if (rows.length >= maxRows) {
          truncated = true;
          break;
        }
        rows.push(row.map(toSqlValue));
      }
      return { ok: true, columns, rows, elapsedMs: performance.now() - t0, truncated };
    } catch (e) {
      const message = (e as Error).message;
      return { ok: false, error: { kind: /syntax error|incomplete input|unrecognized token/.test(message) ? "syntax" : "runtime", message } };
    }
  }

  async close(): Promise<void> {
    for (const db of this.dbs.values()) db.close();
    this.dbs.clear();
  }
}

/** The executor task verification uses by default: an ExecutorPool (close it when done). */
export async function createExecutor(opts: { workers?: number } = {}): Promise<Executor> {
  return new ExecutorPool({ workers: opts.workers });
}
