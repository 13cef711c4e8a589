import { test } from "node:test";
import assert from "node:assert/strict";
import { ExecutorPool } from "../../lib/db/pool.js";
import { workerEntry } from "../../lib/db/spawn.js";
import { kitPath } from "../../lib/core/paths.js";
import { FastGraders } from "../../lib/verifier/fast-graders.js";
import { gradeLine } from "../../lib/verifier/line-grader.js";
import { REQUEST_DEFAULTS } from "../../lib/verifier/request.js";
import { makeFixtureDb } from "../db/fixture.js";

const RUNAWAY = "WITH RECURSIVE r(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM r) SELECT count(*) FROM r";

test("fast graders answer in order; a line whose query runs away is graded again on the pool (timeout, gold_failed)", async () => {
  const db = makeFixtureDb();
  // the runaways end only at the limit, so any limit shows the fallback; 5 s keeps the ordinary lines far
  // from it on a loaded machine (400 ms did not)
  const options = { neighborSeed: 0, timeoutMs: 5000 };
  const pool = new ExecutorPool({ workers: 1, startOnDemand: true });
  let fellBack = 0;
  const fallback = (raw: string, n: number) => {
    fellBack++;
    return gradeLine(pool, raw, n, REQUEST_DEFAULTS, options);
  };
  const graders = new FastGraders(workerEntry(), 2, REQUEST_DEFAULTS, options, fallback, { T2S_WORKER_MODULE: kitPath("lib", "verifier", "grade-worker.ts") });
  try {
    const line = (gold: string, pred: string) => JSON.stringify({ db, gold, pred, reply: false });
    const lines = [
      line("SELECT name FROM items ORDER BY id", "SELECT name FROM items ORDER BY id"),
      line("SELECT count(*) FROM items", RUNAWAY),
      line("SELECT count(*) FROM tags", "SELECT 300"),
      line(RUNAWAY, "SELECT 1"),
      "not json",
      line('SELECT id FROM items WHERE name = "pear"', "SELECT 2"),
    ];
    const answers = (await Promise.all(lines.map((l, i) => graders.answer(l, i + 1)))).map((a) => JSON.parse(a));
    assert.equal(answers[0].outcome, "correct");
    assert.equal(answers[1].outcome, "timeout", JSON.stringify(answers[1]));
    assert.equal(answers[2].outcome, "correct");
    assert.match(answers[3].error, /^line 4: gold_failed: .*timeout/);
    assert.match(answers[4].error, /^line 5: not valid JSON/);
    assert.match(answers[5].error, /line 6: gold_failed/, "the kit's dialect by default");
    assert.ok(fellBack >= 2, "the runaway lines went to the pool");
  } finally {
    await graders.close();
    await pool.close();
  }
});
