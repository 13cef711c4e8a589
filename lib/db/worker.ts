/**
 * The worker process of the executor pool: receives one query at a time over IPC, runs it on a cached
 * read-only connection and replies. The pool kills it when a query runs too long or uses too much memory,
 * which is the only way to stop SQLite inside better-sqlite3; a watchdog thread in here does the same if
 * the pool cannot (its event loop is blocked, or it died).
 */
import Database from "better-sqlite3";
import { ConnectionCache } from "./connection.js";
import { checkPrepared, checkSqlText } from "./allowlist.js";
import type { RunReply, RunRequest } from "./protocol.js";
import { runQuery } from "./run.js";
import { startWatchdog, WATCHDOG_GRACE_MS } from "./watchdog.js";

/**
 * Sets SQLite's heap limit and runs the whole query path once in memory, so a worker's first real query is
 * not slowed by loading code.
 */
function warmUp(): void {
  const db = new Database(":memory:");
  try {
    // Process-wide. Inert in builds without memory statistics (better-sqlite3 12 compiles them out, so the
    // pool's kill and the kernel data limit do the work), but it holds wherever SQLite can enforce it.
    const mb = Number(process.env.T2S_DB_MEMORY_MB);
    if (mb > 0) db.pragma(`hard_heap_limit = ${Math.floor(mb * 1024 * 1024)}`);
    const sql = "SELECT 1 AS x UNION ALL SELECT 2";
    if (!checkSqlText(sql)) {
      const stmt = db.prepare(sql);
      if (!checkPrepared(db, stmt, sql)) for (const _row of stmt.raw(true).iterate()) void _row;
    }
  } finally {
    db.close();
  }
}

function serve(send: (message: unknown) => boolean): void {
  const cache = new ConnectionCache();
  const deadline = startWatchdog();
  process.on("message", (raw: unknown) => {
    const req = raw as RunRequest;
    if (!req || typeof req.id !== "number") return;
    let reply: RunReply;
    deadline[0] = Date.now() + (Number(req.timeoutMs) || 5000) + WATCHDOG_GRACE_MS;
    try {
      reply = { id: req.id, outcome: runQuery(cache, req.dbPath, req.sql, { maxRows: req.maxRows, maxResultBytes: req.maxResultBytes, dialect: req.dialect, exactPath: req.exactPath === true }) };
    } catch (e) {
      // a failure of this process, not of the query: the pool runs the query again on a fresh worker
      reply = { id: req.id, outcome: { ok: false, error: { kind: "runtime", message: "internal error" } }, infra: (e as Error).message };
    } finally {
      deadline[0] = 0;
    }
    send(reply);
  });
  // The pool went away (closed or crashed): nothing left to serve.
  process.on("disconnect", () => {
    cache.close();
    process.exit(0);
  });
  warmUp();
  send({ ready: true, pid: process.pid });
}

if (typeof process.send === "function") serve(process.send.bind(process));
