/**
 * A grade is a verdict on the SQL, never on the sandbox: a SQL worker killed while it runs the candidate or
 * the gold says nothing about either. The query runs again on a fresh worker, the grade equals the grade
 * without the kill, and nothing the death produced is cached; when the worker dies on every retry the grade
 * rejects with `infra_error`, not `sql_error` or `gold_failed`. Real worker processes, killed by pid while
 * they are inside SQLite; the shipped shop database.
 */
import { test, after } from "node:test";
import assert from "node:assert/strict";
import { isT2sError } from "../../lib/core/errors.js";
import { kitPath } from "../../lib/core/paths.js";
import { ExecutorPool, INFRA_RETRIES } from "../../lib/db/pool.js";
import { GoldCache } from "../../lib/verifier/goldcache.js";
import { grade, type GradeOptions } from "../../lib/verifier/grade.js";
import { killWhileRunning, slowCount } from "../db/kill.js";

const shopDb = kitPath("data", "shop", "shop.sqlite");
/** Long enough that a kill lands while it runs, on any machine (a few seconds on one core). */
const N = 3_000_000;
/** No time limit in play: the kills, not the clock, decide what happens. */
const TIMEOUT_MS = 600_000;

const pool = new ExecutorPool({ workers: 1, spareWorkers: 1 });
after(() => pool.close());

function opts(cache: GoldCache | false): GradeOptions {
  return { executor: pool, isReply: false, goldCache: cache, timeoutMs: TIMEOUT_MS };
}

test("a correct candidate whose worker is killed mid-query is graded as without the kill, and the same item again too", async () => {
  const task = { db_path: shopDb, gold_sql: `SELECT ${N}` };
  const want = await grade(task, slowCount(N), opts(false));
  assert.equal(want.outcome, "correct", want.reason);
  const cache = new GoldCache();
  const retriesBefore = pool.stats().infraRetries;
  const graded = grade(task, slowCount(N), opts(cache));
  await killWhileRunning(pool, graded);
  assert.deepEqual(await graded, want);
  assert.equal(pool.stats().infraRetries, retriesBefore + 1, "the kill landed while the candidate ran, and it ran again");
  // the death was never cached: the same item again gets the same (correct) grade
  assert.deepEqual(await grade(task, slowCount(N), opts(cache)), want);
});

test("a gold whose worker is killed mid-query is run again: no gold_failed, now or later", async () => {
  const task = { db_path: shopDb, gold_sql: slowCount(N), id: "slow-gold" };
  const cache = new GoldCache();
  const retriesBefore = pool.stats().infraRetries;
  const graded = grade(task, `SELECT ${N}`, opts(cache));
  await killWhileRunning(pool, graded.catch(() => undefined));
  const got = await graded;
  assert.equal(got.outcome, "correct", got.reason);
  assert.equal(pool.stats().infraRetries, retriesBefore + 1);
  assert.equal((await grade(task, `SELECT ${N}`, opts(cache))).outcome, "correct");
  assert.equal((await grade(task, `SELECT ${N + 1}`, opts(cache))).outcome, "wrong_rows");
});

test("a worker that dies on every retry is an infra_error, never the model's sql_error, and is not cached", async () => {
  const task = { db_path: shopDb, gold_sql: `SELECT ${N}` };
  const cache = new GoldCache();
  const graded = grade(task, slowCount(N), opts(cache)).then(
    (r) => ({ r }),
    (e: unknown) => ({ e }),
  );
  for (let i = 0; i <= INFRA_RETRIES; i++) await killWhileRunning(pool, graded);
  const got = await graded;
  assert.ok("e" in got, `graded as ${JSON.stringify("r" in got ? got.r : null)} instead of an infra_error`);
  assert.ok(isT2sError(got.e, "infra_error"), String(got.e));
  assert.match((got.e as Error).message, /not of the query/);
  const again = await grade(task, slowCount(N), opts(cache));
  assert.equal(again.outcome, "correct", again.reason);
});

test("a gold whose worker dies on every retry is an infra_error, not gold_failed, and the task grades afterwards", async () => {
  const task = { db_path: shopDb, gold_sql: slowCount(N), id: "slow-gold-2" };
  const cache = new GoldCache();
  const graded = grade(task, `SELECT ${N}`, opts(cache)).then(
    (r) => ({ r }),
    (e: unknown) => ({ e }),
  );
  for (let i = 0; i <= INFRA_RETRIES; i++) await killWhileRunning(pool, graded);
  const got = await graded;
  assert.ok("e" in got && isT2sError(got.e, "infra_error"), JSON.stringify(got));
  assert.equal((await grade(task, `SELECT ${N}`, opts(cache))).outcome, "correct");
});
