/**
 * `t2s env serve` as a shared service: one grading path with `t2s grade --jsonl` (per-line options, flags,
 * --suite-dir), databases only from the task set and --db-root, the API key, tool queries that cannot
 * starve grading, the early 413, the idle-connection cap, unknown fields and the port range. Real child
 * processes and servers on 127.0.0.1, real SQLite files.
 */
import { test, after } from "node:test";
import assert from "node:assert/strict";
import { copyFileSync, mkdirSync, symlinkSync } from "node:fs";
import { connect, type Socket } from "node:net";
import { join } from "node:path";
import Database from "better-sqlite3";
import { ExecutorPool } from "../../lib/db/pool.js";
import { EnvService } from "../../lib/envserve/service.js";
import { startEnvServer } from "../../lib/envserve/server.js";
import { HANG_GUARD_MS, runCli, scratchDir } from "../helpers.js";
import { call, shopTasks, startEnvChild } from "./fixture.js";

const tasks = shopTasks();
const shopDb = tasks[0].db_path;

const PAIRS = [
  { gold: "SELECT name FROM categories WHERE category_id = 1", pred: "SELECT upper(name) FROM categories WHERE category_id = 1" },
  { gold: "SELECT DISTINCT country FROM customers", pred: "SELECT country FROM customers" },
  { gold: "SELECT COUNT(*) FROM customers WHERE country = 'DE'", pred: 'SELECT COUNT(*) FROM customers WHERE country = "DE"' },
  { gold: "SELECT customer_id FROM customers ORDER BY customer_id LIMIT 5", pred: "SELECT customer_id FROM customers ORDER BY customer_id DESC LIMIT 5" },
];
const OPTIONS = [{}, { text: "exact" }, { distinct: "ignore" }, { dialect: "spider" }, { dialect: "spider", text: "fold", distinct: "ignore" }];

async function gradeThroughCli(lines: object[], flags: string[] = []): Promise<any[]> {
  const r = await runCli(["grade", "--jsonl", "--workers", "1", ...flags], { input: lines.map((l) => JSON.stringify(l)).join("\n") + "\n", timeoutMs: HANG_GUARD_MS });
  assert.equal(r.code, 0, r.stderr);
  return r.stdout.trim().split("\n").map((l) => JSON.parse(l));
}

test("a line graded through env serve answers as `t2s grade --jsonl` under text, dialect and distinct fields and flags", { timeout: 3 * HANG_GUARD_MS }, async () => {
  const lines = PAIRS.flatMap((p) => OPTIONS.map((o) => ({ db: shopDb, gold: p.gold, pred: "```sql\n" + p.pred + "\n```", ...o })));
  for (const flags of [[], ["--text", "exact", "--distinct", "ignore"], ["--dialect", "spider"]]) {
    const want = await gradeThroughCli(lines, flags);
    const server = await startEnvChild(["--workers", "1", ...flags]);
    try {
      const got = await call(server.url, "/v1/grade", { items: lines });
      assert.equal(got.status, 200);
      got.json.results.forEach((r: any, i: number) => {
        assert.equal(r.error, undefined, r.error);
        const { sql, ...answer } = r;
        assert.ok(sql !== undefined);
        assert.deepEqual(answer, want[i], `${flags.join(" ")} line ${i}: ${JSON.stringify(lines[i])}`);
      });
    } finally {
      await server.stop();
    }
    if (flags.length === 0) {
      // the options change verdicts, so agreement is not agreement on one outcome
      assert.notEqual(want[0].outcome, want[1].outcome, "text exact changes the first pair's verdict");
      assert.notEqual(want[5].outcome, want[7].outcome, "distinct ignore changes the second pair's verdict");
    }
  }
});

test("--suite-dir is honoured: a match must also hold on the test-suite databases, as in `t2s grade`", { timeout: HANG_GUARD_MS }, async () => {
  const dir = scratchDir("t2s-suite-");
  mkdirSync(join(dir, "shop"));
  const alt = join(dir, "shop", "alt.sqlite");
  copyFileSync(shopDb, alt);
  const db = new Database(alt);
  db.prepare("DELETE FROM customers WHERE customer_id = (SELECT MAX(customer_id) FROM customers)").run();
  db.close();
  const main = new Database(shopDb, { readonly: true });
  const n = (main.prepare("SELECT COUNT(*) AS n FROM customers").get() as { n: number }).n;
  main.close();
  const line = { db: shopDb, gold: "SELECT COUNT(*) FROM customers", pred: `SELECT ${n}`, reply: false };
  assert.equal((await gradeThroughCli([line]))[0].outcome, "correct");
  const want = await gradeThroughCli([line], ["--suite-dir", dir]);
  assert.equal(want[0].outcome, "wrong_rows");
  const server = await startEnvChild(["--workers", "1", "--suite-dir", dir]);
  try {
    const got = await call(server.url, "/v1/grade", { items: [line] });
    assert.equal(got.json.results[0].outcome, "wrong_rows");
    assert.equal(got.json.results[0].reason, want[0].reason);
  } finally {
    await server.stop();
  }
});

test("databases outside the task set and --db-root are refused, symlinks out of a root included", { timeout: HANG_GUARD_MS }, async () => {
  const outside = scratchDir("t2s-outside-");
  const secret = join(outside, "secret.sqlite");
  copyFileSync(shopDb, secret);
  const root = scratchDir("t2s-root-");
  const allowed = join(root, "copy.sqlite");
  copyFileSync(shopDb, allowed);
  symlinkSync(secret, join(root, "escape.sqlite"));
  const pool = new ExecutorPool({ workers: 1 });
  const service = new EnvService({ executor: pool, tasks: tasks.slice(0, 5), dbRoots: [root] });
  const server = await startEnvServer({ service, port: 0 });
  after(async () => {
    await server.close();
    await pool.close();
  });
  for (const db of [secret, join(root, "escape.sqlite"), join(root, "..", "x.sqlite")]) {
    const tool = await call(server.url, "/v1/tool", { db, query: "SELECT name FROM sqlite_master" });
    assert.equal(tool.status, 403, db);
    assert.match(tool.json.error.message, /not one the service serves/);
    const prompt = await call(server.url, "/v1/prompt", { db, question: "q" });
    assert.equal(prompt.status, 403);
    assert.doesNotMatch(prompt.text, /CREATE TABLE/);
    const graded = await call(server.url, "/v1/grade", { items: [{ db, gold: "SELECT 1", pred: "SELECT 1" }] });
    assert.match(graded.json.results[0].error, /item 0: database .* is not one the service serves/);
  }
  const inRoot = await call(server.url, "/v1/tool", { db: allowed, query: "SELECT COUNT(*) AS n FROM orders" });
  assert.equal(inRoot.status, 200);
  assert.match(inRoot.json.content, /n/);
  const byTaskDb = await call(server.url, "/v1/grade", { items: [{ db: tasks[0].db_path, gold: "SELECT 1", pred: "SELECT 1", reply: false }] });
  assert.equal(byTaskDb.json.results[0].outcome, "correct");
});

test("unknown fields in items, tool and prompt requests are refused, naming the field", async () => {
  const pool = new ExecutorPool({ workers: 1 });
  const service = new EnvService({ executor: pool, tasks: tasks.slice(0, 3) });
  const server = await startEnvServer({ service, port: 0 });
  try {
    const g = await call(server.url, "/v1/grade", { items: [{ task_id: tasks[0].id, pred: "SELECT 1", presets: "binary" }, { task_id: tasks[0].id, pred: "SELECT 1" }] });
    assert.match(g.json.results[0].error, /item 0: unknown field "presets" in a grade item/);
    assert.ok(g.json.results[1].outcome);
    const t = await call(server.url, "/v1/tool", { task_id: tasks[0].id, query: "SELECT 1", timeout: 5 });
    assert.equal(t.status, 400);
    assert.match(t.json.error.message, /unknown field "timeout" in a tool request/);
    const p = await call(server.url, "/v1/prompt", { task_id: tasks[0].id, styles: "tool" });
    assert.equal(p.status, 400);
    assert.match(p.json.error.message, /unknown field "styles"/);
  } finally {
    await server.close();
    await pool.close();
  }
});

test("with an API key every route but /health needs it; off loopback a key is required; a port past 65535 is a usage error", { timeout: HANG_GUARD_MS }, async () => {
  const server = await startEnvChild(["--workers", "1", "--api-key", "k3y"]);
  try {
    const none = await fetch(server.url + "/v1/tasks");
    assert.equal(none.status, 401);
    const wrong = await fetch(server.url + "/v1/tasks", { headers: { authorization: "Bearer nope" } });
    assert.equal(wrong.status, 401);
    const right = await fetch(server.url + "/v1/tasks", { headers: { authorization: "Bearer k3y" } });
    assert.equal(right.status, 200);
    const grade = await fetch(server.url + "/v1/grade", { method: "POST", body: JSON.stringify({ items: [] }), headers: { "x-api-key": "k3y" } });
    assert.equal(grade.status, 200);
    assert.equal((await fetch(server.url + "/health")).status, 200);
  } finally {
    await server.stop();
  }
  const open = await runCli(["env", "serve", "--host", "0.0.0.0", "--port", "0"], { env: { T2S_API_KEY: "" } });
  assert.equal(open.code, 2);
  assert.match(open.stderr, /^error \[usage\]: --host 0\.0\.0\.0 is reachable from other machines: give --api-key/);
  const port = await runCli(["env", "serve", "--port", "70000"]);
  assert.equal(port.code, 2);
  assert.match(port.stderr, /^error \[usage\]: --port must be an integer from 0 to 65535, got '70000'/);
});

test("runaway tool queries do not hold grading back: tools have their own workers", { timeout: HANG_GUARD_MS }, async () => {
  const server = await startEnvChild(["--workers", "1", "--tool-workers", "1", "--tool-timeout-ms", "3000"]);
  try {
    const runaway = "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) SELECT COUNT(*) FROM c";
    // the three runaways share one tool worker, so they end one after another, 3 s apart; a grade queued
    // behind them would answer after the last. Order, not speed: the grade must answer before the last one.
    const answered: string[] = [];
    const tools = Array.from({ length: 3 }, (_, i) => call(server.url, "/v1/tool", { task_id: tasks[0].id, query: runaway }).then((r) => (answered.push(`tool ${i}`), r)));
    const graded = await call(server.url, "/v1/grade", { items: [{ task_id: tasks[1].id, pred: "```sql\n" + tasks[1].gold_sql + "\n```" }] });
    answered.push("grade");
    assert.equal(graded.json.results[0].outcome, "correct");
    for (const r of await Promise.all(tools)) assert.match(r.json.content, /^error \(timeout\)/);
    assert.notEqual(answered.indexOf("grade"), answered.length - 1, `the grade answered after every runaway tool query: ${answered.join(", ")}`);
  } finally {
    await server.stop();
  }
});

function rawRequest(url: string, head: string, body: string, waitMs: number): Promise<string> {
  const { hostname, port } = new URL(url);
  return new Promise((resolve, reject) => {
    const s = connect(Number(port), hostname);
    let got = "";
    const timer = setTimeout(() => {
      s.destroy();
      resolve(got);
    }, waitMs);
    s.on("data", (d) => {
      got += d;
      if (/\r\n\r\n[\s\S]*\}/.test(got)) {
        clearTimeout(timer);
        s.destroy();
        resolve(got);
      }
    });
    s.on("error", (e) => {
      clearTimeout(timer);
      if (got) resolve(got);
      else reject(e);
    });
    s.write(head + body);
  });
}

test("an oversized body gets its 413 before the rest of it is sent", { timeout: HANG_GUARD_MS }, async () => {
  const pool = new ExecutorPool({ workers: 1, startOnDemand: true });
  const service = new EnvService({ executor: pool, tasks: tasks.slice(0, 2) });
  const server = await startEnvServer({ service, port: 0, maxBodyBytes: 4096 });
  try {
    const declared = `POST /v1/grade HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-type: application/json\r\ncontent-length: 50000000\r\n\r\n`;
    const answer = await rawRequest(server.url, declared, '{"items": [', HANG_GUARD_MS);
    assert.match(answer, /^HTTP\/1\.1 413 /);
    assert.match(answer, /over 4096 bytes/);
    // a chunked body with no declared length is cut off once the count passes the limit
    const chunked = `POST /v1/grade HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-type: application/json\r\ntransfer-encoding: chunked\r\n\r\n`;
    const piece = "x".repeat(8000);
    const answer2 = await rawRequest(server.url, chunked, `${piece.length.toString(16)}\r\n${piece}\r\n`, HANG_GUARD_MS);
    assert.match(answer2, /^HTTP\/1\.1 413 /);
  } finally {
    await server.close();
    await pool.close();
  }
});

test("idle connections past the cap are closed oldest first, and a new client is still answered", { timeout: HANG_GUARD_MS }, async () => {
  const pool = new ExecutorPool({ workers: 1, startOnDemand: true });
  const service = new EnvService({ executor: pool, tasks: tasks.slice(0, 2) });
  const server = await startEnvServer({ service, port: 0, maxIdleConnections: 20 });
  const { port } = new URL(server.url);
  const sockets: Socket[] = [];
  let closed = 0;
  try {
    for (let i = 0; i < 300; i++) {
      const s = connect(Number(port), "127.0.0.1");
      s.on("error", () => {});
      s.on("close", () => closed++);
      sockets.push(s);
      await new Promise<void>((r) => s.once("connect", () => r()));
    }
    const r = await fetch(server.url + "/v1/tasks");
    assert.equal(r.status, 200);
    // the server closes the oldest idle sockets as the new ones arrive; wait for their close events
    const until = Date.now() + HANG_GUARD_MS;
    while (closed < 270 && Date.now() < until) await new Promise((res) => setTimeout(res, 20));
    assert.ok(closed >= 270, `the server closed ${closed} of 300 idle sockets`);
    assert.ok(sockets.slice(-10).every((s) => !s.destroyed), "the newest idle sockets stay open");
  } finally {
    for (const s of sockets) s.destroy();
    await server.close();
    await pool.close();
  }
});
