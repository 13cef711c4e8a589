/**
 * The attack rows of `npm run bench:env`: latencies of `t2s env serve` (in this process, on port 0) while
 * another client floods it, after a client left with runaway predictions, while a large database is hashed,
 * when a SQL worker is killed mid-grade, and while a writer commits to a WAL database that is read.
 */
import { spawn } from "node:child_process";
import { mkdtempSync, rmSync, truncateSync } from "node:fs";
import { request } from "node:http";
import { tmpdir } from "node:os";
import { join } from "node:path";
import Database from "better-sqlite3";
import { kitPath } from "../lib/core/paths.js";
import { ExecutorPool } from "../lib/db/pool.js";
import { EnvService } from "../lib/envserve/service.js";
import { startEnvServer } from "../lib/envserve/server.js";

const RUNAWAY = "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) SELECT count(*) FROM c";
const slow = (n: number) => `WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < ${n}) SELECT count(*) FROM c`;

/** POSTs JSON on a connection of its own; `leave()` drops the connection. */
function post(url: string, path: string, body: unknown): { answer: Promise<string>; leave(): void } {
  const text = JSON.stringify(body);
  const req = request(url + path, { method: "POST", agent: false, headers: { "content-type": "application/json", "content-length": Buffer.byteLength(text) } });
  const answer = new Promise<string>((resolve, reject) => {
    req.on("response", (res) => {
      let got = "";
      res.on("data", (d) => (got += d));
      res.on("end", () => resolve(got));
    });
    req.on("error", reject);
  });
  answer.catch(() => undefined);
  req.end(text);
  return { answer, leave: () => req.destroy() };
}

async function ms(work: () => Promise<unknown>): Promise<number> {
  const t0 = performance.now();
  await work();
  return performance.now() - t0;
}

/** Times /health round trips until stop(); returns the largest and the median. */
function healthTimer(url: string): { stop(): Promise<{ max: number; median: number; n: number }> } {
  let running = true;
  const times: number[] = [];
  const loop = (async () => {
    while (running) times.push(await ms(() => fetch(url + "/health").then((r) => r.text())));
  })();
  return {
    async stop() {
      running = false;
      await loop;
      const sorted = [...times].sort((a, b) => a - b);
      return { max: sorted[sorted.length - 1] ?? 0, median: sorted[Math.floor(sorted.length / 2)] ?? 0, n: times.length };
    },
  };
}

const until = async (cond: () => boolean) => {
  while (!cond()) await new Promise((r) => setTimeout(r, 5));
};

const WRITER = `
const Database = require(process.env.BS3);
const db = new Database(process.env.DB);
db.pragma("journal_mode = WAL");
db.pragma("wal_autocheckpoint = 50");
db.exec("CREATE TABLE IF NOT EXISTS t (batch INTEGER, pad BLOB)");
const insert = db.prepare("INSERT INTO t VALUES (?, randomblob(2000))");
let batch = 0, stop = false;
process.stdin.on("end", () => { stop = true; }).resume();
const tx = db.transaction(() => { batch++; for (let i = 0; i < 50; i++) insert.run(batch); db.prepare("DELETE FROM t WHERE batch <= ?").run(batch - 200); });
const loop = () => { if (stop) { db.close(); return; } tx(); setImmediate(loop); };
for (let i = 0; i < 200; i++) tx();
console.log("ready");
loop();`;

/** The rows of the attack table: [case, measure, value]. */
export async function attackRows(o: { flood: number; hashMb: number }): Promise<string[][]> {
  const dir = mkdtempSync(join(tmpdir(), "t2s-bench-attacks-"));
  const shop = kitPath("data", "shop", "shop.sqlite");
  const pool = new ExecutorPool({ workers: 2, spareWorkers: 1 });
  const service = new EnvService({ executor: pool, tasks: [], dbRoots: [kitPath("data", "shop"), dir], concurrency: 4, line: { timeoutMs: 60_000 } });
  const server = await startEnvServer({ service, port: 0 });
  const url = server.url;
  const rows: string[][] = [];
  const item = (gold: string, pred: string, db = shop) => ({ db, gold, pred, reply: false });
  const one = () => ms(() => post(url, "/v1/grade", { items: [item("SELECT 1", "SELECT 1")] }).answer);
  try {
    await pool.ready();
    await one();
    rows.push(["idle", "one-item grade, ms", (await one()).toFixed(0)]);

    // another client's flood of slow items, served in turn
    const flood = post(url, "/v1/grade", { items: Array.from({ length: o.flood }, (_, i) => item("SELECT 0", slow(300_000 + i))) });
    await until(() => pool.stats().busy > 0);
    const health = healthTimer(url);
    rows.push([`${o.flood} slow items of another client in flight`, "one-item grade, ms", (await one()).toFixed(0)]);
    flood.leave();
    const h1 = await health.stop();
    rows.push([`${o.flood} slow items of another client in flight`, "/health max / median, ms", `${h1.max.toFixed(0)} / ${h1.median.toFixed(0)} (${h1.n})`]);

    // a client that left with runaways: its grading is cancelled
    const gone = post(url, "/v1/grade", { items: Array.from({ length: o.flood }, (_, i) => item("SELECT 1", `${RUNAWAY} -- ${i}`)) });
    await until(() => pool.stats().busy > 0);
    gone.leave();
    rows.push([`${o.flood} runaways of a client that left`, "one-item grade, ms", (await one()).toFixed(0)]);

    // a large database hashed for the gold cache (off the event loop)
    const big = join(dir, "big.sqlite");
    const db = new Database(big);
    db.exec("CREATE TABLE t (x INTEGER); INSERT INTO t VALUES (1), (2), (3)");
    db.close();
    truncateSync(big, o.hashMb * 1024 * 1024);
    const h2timer = healthTimer(url);
    const first = await ms(() => post(url, "/v1/grade", { items: [item("SELECT count(*) FROM t", "SELECT 3", big)] }).answer);
    const h2 = await h2timer.stop();
    rows.push([`first grade on a ${o.hashMb} MB database`, "grade (hash included), ms", first.toFixed(0)]);
    rows.push([`first grade on a ${o.hashMb} MB database`, "/health max / median, ms", `${h2.max.toFixed(0)} / ${h2.median.toFixed(0)} (${h2.n})`]);
    rows.push([`second grade on the ${o.hashMb} MB database`, "grade (hash remembered), ms", (await ms(() => post(url, "/v1/grade", { items: [item("SELECT count(*) FROM t", "SELECT 3", big)] }).answer)).toFixed(0)]);

    // a SQL worker killed while it runs the candidate: run again on a fresh worker
    const N = 2_000_000;
    rows.push(["slow candidate, no kill", "grade, ms", (await ms(() => post(url, "/v1/grade", { items: [item(`SELECT ${N}`, slow(N))] }).answer)).toFixed(0)]);
    const killed = post(url, "/v1/grade", { items: [item(`SELECT ${N + 1}`, slow(N + 1))] });
    const t0 = performance.now();
    await until(() => pool.busyWorkerPids().length > 0);
    await new Promise((r) => setTimeout(r, 200));
    for (const pid of pool.busyWorkerPids()) process.kill(pid, "SIGKILL");
    const outcome = JSON.parse(await killed.answer).results[0].outcome;
    rows.push(["slow candidate, worker killed once after 200 ms", "grade, ms (outcome)", `${(performance.now() - t0).toFixed(0)} (${outcome})`]);

    // reads of a WAL database a writer keeps committing to
    const live = join(dir, "live.sqlite");
    const writer = spawn(process.execPath, ["-e", WRITER], { stdio: ["pipe", "pipe", "inherit"], env: { ...process.env, BS3: kitPath("node_modules", "better-sqlite3"), DB: live } });
    await new Promise<void>((resolve) => writer.stdout!.once("data", () => resolve()));
    let reads = 0;
    let bad = 0;
    const t1 = performance.now();
    while (performance.now() - t1 < 10_000) {
      const r = JSON.parse(await post(url, "/v1/tool", { db: live, query: "SELECT count(*) % 50 AS r FROM t" }).answer) as { content: string };
      reads++;
      if (r.content !== "r\n0") bad++;
    }
    const s = (performance.now() - t1) / 1000;
    writer.stdin!.end();
    await new Promise((r) => writer.once("exit", r));
    rows.push(["WAL database, writer committing", "/v1/tool reads/s (not a committed snapshot)", `${(reads / s).toFixed(1)} (${bad} of ${reads})`]);
  } finally {
    await server.close();
    await pool.close();
    rmSync(dir, { recursive: true, force: true });
  }
  return rows;
}
