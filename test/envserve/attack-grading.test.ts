/**
 * `t2s env serve`'s grading under attack and accident: a SQL worker killed mid-grade (the grade is retried and
 * equals the grade without the kill; killed on every retry, the item is an infra_error, counted apart and
 * never cached), a client that goes away with runaway predictions (its grading is cancelled and its queries'
 * workers stopped), a client that floods the queue (another client's item is served in turn, not after the
 * flood), a batch past the item cap, and SIGTERM with a grade in flight (answered, then the exit). Real
 * servers on port 0, real worker processes, a concurrent /health poller.
 */
import { test, after } from "node:test";
import assert from "node:assert/strict";
import { request } from "node:http";
import { kitPath } from "../../lib/core/paths.js";
import { ExecutorPool, INFRA_RETRIES } from "../../lib/db/pool.js";
import type { Executor } from "../../lib/db/types.js";
import { EnvService, MAX_GRADE_ITEMS } from "../../lib/envserve/service.js";
import { startEnvServer, type RunningEnvServer } from "../../lib/envserve/server.js";
import { killWhileRunning, slowCount } from "../db/kill.js";
import { runCli } from "../helpers.js";
import { call, startEnvChild } from "./fixture.js";
import { pollHealth } from "./health-poller.js";

const shopDb = kitPath("data", "shop", "shop.sqlite");
const RUNAWAY = "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) SELECT count(*) FROM c";
const closers: Array<() => Promise<void>> = [];
after(async () => {
  for (const close of closers.reverse()) await close();
});

/** A server over its own pool; `log` records each query's SQL as grading starts it. */
async function serve(opts: { workers?: number; timeoutMs?: number; concurrency?: number; maxItems?: number } = {}): Promise<{ server: RunningEnvServer; pool: ExecutorPool; service: EnvService; log: string[] }> {
  const pool = new ExecutorPool({ workers: opts.workers ?? 1, spareWorkers: 1 });
  const log: string[] = [];
  const logged: Executor = {
    execute: (db, sql, o) => {
      log.push(sql);
      return pool.execute(db, sql, o);
    },
    close: () => pool.close(),
  };
  const service = new EnvService({ executor: logged, tasks: [], dbRoots: [kitPath("data", "shop")], concurrency: opts.concurrency, maxItems: opts.maxItems, line: { timeoutMs: opts.timeoutMs ?? 600_000 } });
  const server = await startEnvServer({ service, port: 0 });
  closers.push(() => pool.close(), () => server.close());
  return { server, pool, service, log };
}

const item = (gold: string, pred: string) => ({ db: shopDb, gold, pred, reply: false });

/** Sends a grade request on its own connection and returns it, so the test can go away mid-request. */
function openGrade(url: string, items: object[]): { answer: Promise<string>; leave(): void } {
  const body = JSON.stringify({ items });
  const req = request(url + "/v1/grade", { method: "POST", agent: false, headers: { "content-type": "application/json", "content-length": Buffer.byteLength(body) } });
  const answer = new Promise<string>((resolve, reject) => {
    req.on("response", (res) => {
      let text = "";
      res.on("data", (d) => (text += d));
      res.on("end", () => resolve(text));
    });
    req.on("error", reject);
  });
  answer.catch(() => undefined);
  req.end(body);
  return { answer, leave: () => req.destroy() };
}

async function metric(url: string, line: string): Promise<number> {
  const text = (await call(url, "/metrics")).text;
  const hit = text.split("\n").find((l) => l.startsWith(line + " "));
  return hit ? Number(hit.split(" ")[1]) : 0;
}

test("a grade whose worker is killed mid-query equals the grade without the kill; killed on every retry it is an infra_error item, and the item then grades", async () => {
  const { server, pool } = await serve();
  const N = 3_000_000;
  const one = [item(`SELECT ${N}`, slowCount(N))];
  const want = (await call(server.url, "/v1/grade", { items: one })).json.results[0];
  assert.equal(want.outcome, "correct", JSON.stringify(want));
  // new text (a cached answer would prove nothing): one kill, retried on a fresh worker
  const once = [item(`SELECT ${N + 1}`, slowCount(N + 1))];
  const graded = call(server.url, "/v1/grade", { items: once });
  await killWhileRunning(pool, graded);
  const got = (await graded).json.results[0];
  assert.deepEqual({ ...got, sql: null, reason: null }, { ...want, sql: null, reason: null });
  // killed on every try: an infra_error, not the model's sql_error, and not cached
  const always = [item(`SELECT ${N + 2}`, slowCount(N + 2))];
  const doomed = call(server.url, "/v1/grade", { items: always });
  for (let i = 0; i <= INFRA_RETRIES; i++) await killWhileRunning(pool, doomed);
  const failed = (await doomed).json.results[0];
  assert.equal(failed.code, "infra_error", JSON.stringify(failed));
  assert.equal(failed.outcome, undefined);
  assert.equal(await metric(server.url, 't2s_env_grades_total{outcome="infra_error"}'), 1);
  assert.equal((await call(server.url, "/v1/grade", { items: always })).json.results[0].outcome, "correct");
});

test("a client that goes away has its grading cancelled: its runaway predictions stop, and another client's grade runs", async () => {
  // one SQL lane, and runaways that would hold it for two minutes each
  const { server, pool } = await serve({ timeoutMs: 120_000 });
  const poller = pollHealth(server.url);
  try {
    const runaways = Array.from({ length: 16 }, (_, i) => item("SELECT 1", `${RUNAWAY} -- ${i}`));
    const other = await poller.during(async () => {
      const gone = openGrade(server.url, runaways);
      while (pool.busyWorkerPids().length === 0) await new Promise((r) => setTimeout(r, 10));
      gone.leave();
      return call(server.url, "/v1/grade", { items: [item("SELECT 1", "SELECT 1")] });
    });
    assert.equal(other.json.results[0].outcome, "correct", JSON.stringify(other.json));
    // nothing of the client that left still runs or waits
    const s = pool.stats();
    assert.deepEqual({ busy: s.busy, queued: s.queued }, { busy: 0, queued: 0 });
    assert.equal(await metric(server.url, 't2s_env_grades_total{outcome="cancelled"}'), 16);
  } finally {
    await poller.stop();
  }
});

test("clients share grading in turn: one client's flood does not hold another client's item behind it", async () => {
  const { server, log } = await serve({ workers: 2, concurrency: 2 });
  const poller = pollHealth(server.url);
  try {
    const flood = Array.from({ length: 48 }, (_, i) => item("SELECT 0", slowCount(200_000 + i)));
    let flooding: { leave(): void } | undefined;
    const mine = await poller.during(async () => {
      flooding = openGrade(server.url, flood);
      while (!log.some((sql) => sql.startsWith("WITH RECURSIVE"))) await new Promise((r) => setTimeout(r, 10));
      return call(server.url, "/v1/grade", { items: [item("SELECT 1", "SELECT 1 AS mine")] });
    });
    assert.equal(mine.json.results[0].outcome, "correct");
    const before = log.slice(0, log.indexOf("SELECT 1 AS mine")).filter((sql) => sql.startsWith("WITH RECURSIVE")).length;
    // served in turn: behind the flood items holding the two places and at most one more turn each
    assert.ok(before <= 4, `${before} of the flood's items started before the other client's one`);
    flooding?.leave();
  } finally {
    await poller.stop();
  }
});

test("a batch past the item cap is a 400 naming the limit and its flag; the flag raises it", async () => {
  const { server } = await serve();
  const many = Array.from({ length: MAX_GRADE_ITEMS + 1 }, () => item("SELECT 1", "SELECT 1"));
  const refused = await call(server.url, "/v1/grade", { items: many });
  assert.equal(refused.status, 400);
  assert.match(refused.json.error.message, new RegExp(`at most ${MAX_GRADE_ITEMS} items per request \\(--max-items\\), got ${MAX_GRADE_ITEMS + 1}`));
  const raised = await serve({ maxItems: MAX_GRADE_ITEMS + 1 });
  const ok = await call(raised.server.url, "/v1/grade", { items: many });
  assert.equal(ok.status, 200);
  assert.equal(ok.json.results.length, MAX_GRADE_ITEMS + 1);
  const bad = await runCli(["env", "serve", "--max-items", "0"]);
  assert.equal(bad.code, 2);
  assert.match(bad.stderr, /--max-items/);
});

test("SIGTERM drains: a grade in flight is answered in full, new work is refused, then the server exits 0", async () => {
  const server = await startEnvChild(["--db-root", kitPath("data", "shop"), "--workers", "1", "--timeout-ms", "600000"]);
  const exited = new Promise<number | null>((resolve) => server.child.once("exit", (code) => resolve(code)));
  try {
    const N = 3_000_000;
    const inFlight = call(server.url, "/v1/grade", { items: [item(`SELECT ${N}`, slowCount(N))] });
    while ((await metric(server.url, "t2s_env_inflight_requests")) < 1) await new Promise((r) => setTimeout(r, 10));
    server.child.kill("SIGTERM");
    // once /health says it drains (or the port is closed: the grade was answered already), new work is refused
    let draining = false;
    while (!draining) {
      const h = await call(server.url, "/health").catch(() => null);
      draining = h === null || h.json?.status === "draining";
    }
    const late = await call(server.url, "/v1/grade", { items: [item("SELECT 1", "SELECT 1")] }).catch((e: Error) => ({ status: 0, json: null, text: e.message }));
    const answered = await inFlight;
    assert.equal(answered.status, 200, answered.text);
    assert.equal(answered.json.results[0].outcome, "correct", answered.text);
    assert.ok(late.status === 503 || late.status === 0, `a request after SIGTERM got ${late.status}: ${late.text}`);
    assert.equal(await exited, 0);
  } finally {
    await server.stop();
  }
});
