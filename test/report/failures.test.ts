import { test } from "node:test";
import assert from "node:assert/strict";
import { failures, where, countBy, sample, taskRows, showHtml, browseHtml } from "../../lib/report/failures.js";
import { ExecutorPool } from "../../lib/db/pool.js";
import type { Task } from "../../lib/tasks/types.js";
import type { ReportRow } from "../../lib/report/rows.js";
import { makeItemsDb } from "../support/fixtures.js";
import { scratchDir } from "../helpers.js";
import { makeRows } from "./fixtures.js";

const rows = makeRows({ runs: 1 });

test("failures, where and countBy select and count like arquero verbs", () => {
  const f = failures(rows);
  assert.ok(f.length > 0 && f.every((r) => r.correct === false));
  const hard = where(f, { difficulty: "hard", outcome: ["sql_error", "no_sql"] });
  assert.ok(hard.every((r) => r.difficulty === "hard" && ["sql_error", "no_sql"].includes(r.outcome!)));
  assert.deepEqual(where(rows, (r) => r.sample === 3).map((r) => r.sample), Array(24).fill(3));
  const c = countBy(f, "outcome");
  assert.equal((c.array("n") as number[]).reduce((a, b) => a + b, 0), f.length);
  const n = c.array("n") as number[];
  assert.deepEqual([...n].sort((a, b) => b - a), n);
});

test("sample is seeded and keeps the original order", () => {
  const a = sample(rows, 5, 3);
  assert.deepEqual(a, sample(rows, 5, 3));
  assert.notDeepEqual(a, sample(rows, 5, 4));
  const idx = a.map((r) => rows.indexOf(r));
  assert.deepEqual([...idx].sort((x, y) => x - y), idx);
  assert.equal(sample(rows, 1000).length, rows.length);
  assert.equal(taskRows(rows, "task_001").length, 4);
});

test("showHtml renders the transcript, tool calls, and re-executed got-vs-want rows", async () => {
  const dir = scratchDir();
  const db = makeItemsDb(dir);
  const task: Task = { id: "t1", db_id: "items", db_path: db, question: "Cheap items?", gold_sql: "SELECT name FROM items WHERE price < 5 ORDER BY id", difficulty: "easy", archetype: "lookup", style: "plain", split: "holdout", source: "test" };
  const row: ReportRow = {
    task_id: "t1", sample: 0, correct: false, outcome: "wrong_rows", reason: "result differs", graded_turn: 2, n_assistant_turns: 2, final_sql: "SELECT name FROM items WHERE price < 3",
    turns: [
      { role: "user", content: "Cheap items? <b>now</b>" },
      { role: "assistant", content: null, tool_calls: [{ id: "call_1", type: "function", function: { name: "run_sql", arguments: JSON.stringify({ query: "SELECT count(*) FROM items" }) } }] },
      { role: "tool", tool_call_id: "call_1", content: "count(*)\n5" },
      { role: "assistant", content: "```sql\nSELECT name FROM items WHERE price < 3\n```" },
    ],
  };
  const plain = await showHtml(row, { tasks: [task] });
  // a padded row (benchmark --pad-context): the same turns, the first call being padding, the reply its first own turn
  const padded = await showHtml({ ...row, graded_turn: 1, n_assistant_turns: 1, pad_calls: 1 }, { tasks: [task] });
  assert.equal((padded.match(/— graded turn/g) ?? []).length, 1);
  assert.match(padded, /— graded turn<\/div><pre class="t2s-assistant"[^>]*>```sql\nSELECT name FROM items WHERE price &lt; 3/);
  assert.match(plain, /&lt;b&gt;now&lt;\/b&gt;/);
  assert.match(plain, /tool call<\/em> <code>run_sql<\/code>/);
  assert.match(plain, /tool result \(call_1\)/);
  assert.match(plain, /assistant — graded turn/);
  assert.equal((plain.match(/— graded turn/g) ?? []).length, 1);
  assert.match(plain, /gold SQL/);
  assert.doesNotMatch(plain, /t2s-got-want/);
  const pool = new ExecutorPool({ workers: 1 });
  try {
    const full = await showHtml(row, { tasks: new Map([["t1", task]]), executor: pool });
    const gw = full.slice(full.indexOf("t2s-got-want"));
    const [got, want] = gw.split("want (gold SQL)");
    assert.match(got, /<td>pen<\/td>/);
    assert.doesNotMatch(got, /<td>mug<\/td>/);
    assert.match(want, /<td>pen<\/td>/);
    assert.match(want, /<td>mug<\/td>/);
    const bad = await showHtml({ ...row, final_sql: "SELEC x" }, { tasks: [task], executor: pool });
    assert.match(bad, /color:#d62728">syntax/);
    const browse = await browseHtml([row, { ...row, sample: 1 }], { tasks: [task] });
    assert.equal((browse.match(/<details/g) ?? []).length, 2);
  } finally {
    await pool.close();
  }
});
