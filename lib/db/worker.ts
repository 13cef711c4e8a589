/**
 * The worker process of the executor pool: receives one query at a time over IPC, runs it on a cached
 * read-only connection and replies. It has no timeout of its own: the pool kills it when a query runs too
 * long or uses too much memory, which is the only way to stop SQLite inside better-sqlite3.
 */
import Database from "better-sqlite3";
import { ConnectionCache } from "./connection.js";
import { checkPrepared, checkSqlText } from "./policy.js";
import type { RunReply, RunRequest } from "./protocol.js";
import { runQuery } from "./run.js";

/** Runs the whole query path once in memory, so a worker's first real query is not slowed by loading code. */
function warmUp(): void {
  const db = new Database(":memory:");
  try {
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
  process.on("message", (raw: unknown) => {
    const req = raw as RunRequest;
    if (!req || typeof req.id !== "number") return;
    let reply: RunReply;
    try {
      reply = { id: req.id, outcome: runQuery(cache, req.dbPath, req.sql, { maxRows: req.maxRows, maxResultBytes: req.maxResultBytes }) };
    } catch (e) {
      reply = { id: req.id, outcome: { ok: false, error: { kind: "runtime", message: `internal error: ${(e as Error).message}` } } };
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
