import { test } from "node:test";
import assert from "node:assert/strict";
import { performance } from "node:perf_hooks";
import { ExecutorPool } from "../../lib/db/pool.js";
import { scratchDir } from "../helpers.js";
import { makeFixtureDb } from "./fixture.js";

const RUNAWAY = "WITH RECURSIVE n(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM n) SELECT count(*) FROM n";

test("a normal query waits less than one query timeout behind runaways filling every lane and the queue", async () => {
  const db = makeFixtureDb(scratchDir("t2s-lanes-"));
  const timeoutMs = 4000;
  const pool = new ExecutorPool({ workers: 2, spareWorkers: 1 });
  try {
    await pool.ready();
    // six runaways: with two lanes, three rounds of timeouts before a query queued behind them would start
    const runaways = Array.from({ length: 6 }, () => pool.execute(db, RUNAWAY, { timeoutMs }));
    // every lane taken (not a fixed sleep: workers pick the runaways up later on a loaded machine)
    while (pool.stats().busy < 2) await new Promise((r) => setTimeout(r, 10));
    const t0 = performance.now();
    const normal = await pool.execute(db, "SELECT count(*) FROM items", { timeoutMs });
    const waited = performance.now() - t0;
    assert.ok(normal.ok, JSON.stringify(normal));
    assert.ok(waited < timeoutMs, `the normal query took ${Math.round(waited)} ms behind the runaways (timeout ${timeoutMs} ms)`);
    const outcomes = await Promise.all(runaways);
    assert.ok(outcomes.every((o) => !o.ok && o.error.kind === "timeout"), "every runaway is still stopped at its timeout");
    assert.ok(pool.stats().workers <= 2 * 4 + 1, `the pool grew to ${pool.stats().workers} workers`);
  } finally {
    await pool.close();
  }
});
