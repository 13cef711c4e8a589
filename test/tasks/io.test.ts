import { test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { readTasks, writeTasks } from "../../lib/tasks/io.js";
import { taskId, splitFor } from "../../lib/tasks/split.js";
import { isT2sError } from "../../lib/core/errors.js";
import { scratchDir } from "../helpers.js";
import type { Task } from "../../lib/tasks/types.js";

function task(q: string): Task {
  const id = taskId(q, "pets");
  return { id, db_id: "pets", db_path: "pets.sqlite", question: q, gold_sql: "select 1", difficulty: "easy", archetype: "a", style: "terse", split: splitFor(id), source: "test" };
}

test("write then read round-trips and resolves db_path against the file's folder", () => {
  const dir = scratchDir();
  const file = join(dir, "sub", "tasks.jsonl");
  writeTasks(file, [task("q one"), { ...task("q two"), db_path: join(dir, "sub", "x.sqlite") }]);
  const text = readFileSync(file, "utf8");
  assert.match(text, /"db_path":"x.sqlite"/); // absolute paths are written relative to the file
  const back = readTasks(file);
  assert.equal(back.length, 2);
  assert.equal(back[0].db_path, join(dir, "sub", "pets.sqlite"));
  assert.equal(back[1].db_path, join(dir, "sub", "x.sqlite"));
  assert.equal(back[0].question, "q one");
});

test("missing id and split are computed; defaults fill the labels", () => {
  const dir = scratchDir();
  const file = join(dir, "t.jsonl");
  writeFileSync(file, JSON.stringify({ db_id: "pets", db_path: "p.sqlite", question: "How many?", gold_sql: "select 1" }) + "\n");
  const [t] = readTasks(file);
  assert.equal(t.id, taskId("How many?", "pets"));
  assert.equal(t.split, splitFor(t.id));
  assert.equal(t.difficulty, "unknown");
  assert.equal(t.source, "kit");
});

test("bad lines name file and line", () => {
  const dir = scratchDir();
  const file = join(dir, "t.jsonl");
  const good = JSON.stringify(task("fine"));
  writeFileSync(file, `${good}\n\n{"db_id": "pets", "question": 3}\n`);
  assert.throws(() => readTasks(file), (e) => isT2sError(e, "bad_task") && e.message.includes(`${file}:3`) && /db_path/.test(e.message));
  writeFileSync(file, `${good}\nnot json\n`);
  assert.throws(() => readTasks(file), (e) => isT2sError(e, "bad_jsonl") && e.message.includes(`${file}:2`));
  writeFileSync(file, `${good}\n${good}\n`);
  assert.throws(() => readTasks(file), (e) => isT2sError(e) && /duplicate task id/.test(e.message) && e.message.includes(`${file}:2`));
  writeFileSync(file, JSON.stringify({ ...task("x"), split: "test" }) + "\n");
  assert.throws(() => readTasks(file), (e) => isT2sError(e, "bad_task") && /split/.test(e.message));
  assert.throws(() => readTasks(join(dir, "missing.jsonl")), (e) => isT2sError(e, "not_found"));
});
