import { test } from "node:test";
import assert from "node:assert/strict";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { ExecutorPool } from "../../lib/db/pool.js";
import { shopNotes } from "../../lib/db/shop/build.js";
import { defaultEnv } from "../../lib/runs/env.js";
import { notesFor } from "../../lib/db/notes.js";
import type { Task } from "../../lib/tasks/types.js";
import { scratchDir } from "../helpers.js";
import { makeItemsDb } from "../support/fixtures.js";

test("notes: the shop's own notes for db_id shop, else a NOTES file beside the database, else none", () => {
  const dir = scratchDir();
  const db = makeItemsDb(dir);
  assert.equal(notesFor({ db_id: "shop", db_path: "/anywhere/shop.sqlite" }), shopNotes());
  assert.equal(notesFor({ db_id: "items", db_path: db }), undefined);
  writeFileSync(join(dir, "NOTES.md"), "NOTES\n- folder notes");
  assert.equal(notesFor({ db_id: "items", db_path: db }), "NOTES\n- folder notes");
  writeFileSync(join(dir, "items.notes.md"), "NOTES\n- db notes");
  assert.equal(notesFor({ db_id: "items", db_path: db }), "NOTES\n- db notes");
});

test("the default environment: schema + notes prompt, tool queries on the executor, verifier grading", async () => {
  const dir = scratchDir();
  const db = makeItemsDb(dir);
  writeFileSync(join(dir, "NOTES.md"), "NOTES\n- prices are in USD");
  const task = { id: "t", db_id: "items", db_path: db, question: "How many items?", gold_sql: "SELECT count(*) FROM items", evidence: "items are rows", difficulty: "easy", archetype: "a", style: "s", split: "holdout", source: "t" } as Task;
  const pool = new ExecutorPool({ workers: 1 });
  try {
    await pool.ready();
    const env = defaultEnv({ executor: pool, prompt: { style: "tool" }, toolRows: 2 });
    const [sys, user] = await env.opening(task);
    assert.match(sys.content ?? "", /execute_sql_query[\s\S]*CREATE TABLE items[\s\S]*price in USD[\s\S]*prices are in USD/);
    assert.equal(user.content, "How many items?\n\nEvidence: items are rows");
    const out = await env.runTool(task, "SELECT name FROM items ORDER BY id");
    assert.ok(out.ok && out.rows.length === 2 && out.truncated);
    const good = await env.grade(task, "<solution>SELECT COUNT(*) FROM items</solution>", { finishReason: "stop", invalidToolCalls: 0, assistantTurns: [] });
    assert.equal(good.outcome, "correct");
    const bad = await env.grade(task, "```sql\nSELECT 3\n```", { finishReason: "stop", invalidToolCalls: 0, assistantTurns: [] });
    assert.equal(bad.outcome, "wrong_rows");
  } finally {
    await pool.close();
  }
});
