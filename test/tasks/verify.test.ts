import { test } from "node:test";
import assert from "node:assert/strict";
import { join } from "node:path";
import { DirectExecutor, createExecutorPool } from "../../lib/db/direct-executor.js";
import { verifyTasks } from "../../lib/tasks/verify.js";
import { taskId, splitFor } from "../../lib/tasks/split.js";
import type { Task } from "../../lib/tasks/types.js";
import { scratchDir } from "../helpers.js";
import { makePetsDb } from "./fixtures.js";

function task(dbPath: string, sql: string, q = sql): Task {
  const id = taskId(q, "pets");
  return { id, db_id: "pets", db_path: dbPath, question: q, gold_sql: sql, difficulty: "easy", archetype: "a", style: "terse", split: splitFor(id), source: "test" };
}

const cases: [string, string | null][] = [
  ["SELECT name FROM pets WHERE kind = 'dog' ORDER BY name", null],
  ["SELEC name FROM pets", "sql_error"],
  ["SELECT name FROM pets WHERE kind = 'fish'", "empty"],
  ["WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 60) SELECT i FROM n", "too_many_rows"],
  ["SELECT owner FROM pets WHERE owner IS NULL", "all_null"],
  ["SELECT abs(random()) AS r", "unstable"],
];

for (const [label, make] of [["in-process executor", async () => new DirectExecutor()], ["executor pool", () => createExecutorPool({ workers: 1 })]] as const) {
  test(`verification keeps good golds and names each drop reason (${label})`, async () => {
    const db = makePetsDb(join(scratchDir(), "pets.sqlite"));
    const list = [...cases.map(([sql]) => task(db, sql)), task(join(scratchDir(), "missing.sqlite"), "SELECT 1", "missing db")];
    const executor = await make();
    try {
      const r = await verifyTasks(list, { executor, concurrency: 3 });
      assert.deepEqual(r.kept.map((t) => t.gold_sql), [cases[0][0]]);
      const reasons = Object.fromEntries(r.dropped.map((d) => [d.task.question, d.reason]));
      for (const [sql, want] of cases.slice(1)) assert.equal(reasons[sql], want, sql);
      assert.equal(reasons["missing db"], "no_database");
      assert.equal(r.byReason.empty, 1);
      assert.equal(r.dropped.length, 6);
    } finally {
      await executor.close();
    }
  });
}

test("eval mode keeps every gold that runs and is stable, whatever its rows; failures keep their reasons", async () => {
  const db = makePetsDb(join(scratchDir("t2s-verify-eval-"), "pets.sqlite"));
  const mk = (q: string, sql: string): Task => ({ id: taskId(q, "pets"), db_id: "pets", db_path: db, question: q, gold_sql: sql, difficulty: "easy", archetype: "x", style: "x", split: splitFor(taskId(q, "pets")), source: "test" });
  const tasks = [
    mk("none", "SELECT name FROM pets WHERE 0"),
    mk("many", "SELECT a.name FROM pets a, pets b, pets c, pets d, pets e"),
    mk("nulls", "SELECT NULL"),
    mk("broken", "SELECT nope FROM pets"),
    mk("quoted", 'SELECT count(*) FROM pets WHERE kind = "dog"'),
  ];
  const executor = new DirectExecutor();
  try {
    const train = await verifyTasks(tasks, { executor });
    assert.deepEqual(train.kept.map((t) => t.question), []);
    const evalReport = await verifyTasks(tasks, { executor, mode: "eval" });
    assert.deepEqual(evalReport.kept.map((t) => t.question), ["none", "many", "nulls"]);
    assert.deepEqual(evalReport.byReason, { sql_error: 2 });
    const spider = await verifyTasks(tasks, { executor, mode: "eval", dialect: "spider" });
    assert.deepEqual(spider.kept.map((t) => t.question), ["none", "many", "nulls", "quoted"]);
  } finally {
    await executor.close();
  }
});
