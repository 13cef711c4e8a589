import { test } from "node:test";
import assert from "node:assert/strict";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { birdDescriptions, describeMissing, detectFormat, loadTaskSource, loadTasks } from "../../lib/tasks/loaders.js";
import { readJsonArray } from "../../lib/tasks/jsonfile.js";
import { isT2sError } from "../../lib/core/errors.js";
import { scratchDir } from "../helpers.js";
import { birdFolder, platinumFile, spiderFolder } from "./fixtures.js";

test("Spider folder loads with db paths and hash ids", () => {
  const dir = spiderFolder();
  assert.equal(detectFormat(dir), "spider");
  const tasks = loadTasks(dir);
  assert.equal(tasks.length, 2);
  assert.equal(tasks[0].db_path, join(dir, "database", "pets_1", "pets_1.sqlite"));
  assert.equal(tasks[0].gold_sql, "SELECT count(*) FROM pets WHERE kind = 'dog'");
  assert.match(tasks[0].id, /^t2s_/);
  assert.match(tasks[1].source, /^spider:dev\.json:\d+$/);
  // Spider tasks run in the spider dialect and get Spider's hardness level as their difficulty
  assert.equal(tasks[0].dialect, "spider");
  assert.equal(tasks[0].difficulty, "easy");
});

test("BIRD folder keeps evidence and difficulty, finds descriptions", () => {
  const dir = birdFolder();
  assert.equal(detectFormat(dir), "bird");
  const tasks = loadTasks(dir);
  assert.equal(tasks.length, 2);
  assert.equal(tasks[0].evidence, "oldest refers to MAX(age)");
  assert.equal(tasks[1].evidence, undefined);
  assert.equal(tasks[0].difficulty, "simple");
  assert.equal(tasks[0].dialect, "spider");
  assert.deepEqual(tasks[0].grading, { order: "ignore" }, "BIRD compares rows in any order");
  assert.deepEqual(Object.keys(birdDescriptions(tasks[0].db_path)), ["pets.csv"]);
});

test("BIRD-Platinum jsonl maps grading_method and tolerates NaN evidence", () => {
  const { file } = platinumFile();
  assert.equal(detectFormat(file), "platinum");
  const tasks = loadTasks(file);
  assert.equal(tasks.length, 3);
  assert.deepEqual(tasks[0].grading, { order: "always" });
  assert.deepEqual(tasks[1].grading, { order: "ignore", subset: true, subset_rows: { op: "=", n: 2 } });
  assert.equal(tasks[1].evidence, undefined);
  assert.deepEqual(tasks[2].grading, { order: "ignore" });
  assert.match(tasks[0].source, /plat\.jsonl:7$/);
});

test("repeated questions get distinct ids", () => {
  const q = { db_id: "pets_1", question: "Same?", query: "select 1" };
  const tasks = loadTasks(spiderFolder([q, q]));
  assert.notEqual(tasks[0].id, tasks[1].id);
  assert.equal(tasks[1].id, `${tasks[0].id}-2`);
});

test("bad files name the file and line", () => {
  const dir = spiderFolder([{ db_id: "pets_1", question: "ok", query: "select 1" }, { db_id: "pets_1", question: "no sql" }]);
  assert.throws(() => loadTasks(dir), (e) => isT2sError(e, "bad_task") && e.message.includes(`${join(dir, "dev.json")}:7`) && /query/.test(e.message));
  const unknownDb = spiderFolder([{ db_id: "nope", question: "q", query: "select 1" }]);
  assert.throws(() => loadTasks(unknownDb), (e) => isT2sError(e) && /nope/.test(e.message) && /dev\.json:2/.test(e.message));
  const bird = birdFolder();
  writeFileSync(join(bird, "dev.json"), '[\n  {"db_id": "pets_1", "question": "a", "SQL": "select 1"},\n  {"db_id": "pets_1", "question": "b" "SQL": "x"}\n]\n');
  assert.throws(() => loadTasks(bird), (e) => isT2sError(e, "bad_json") && e.message.includes(`${join(bird, "dev.json")}:3`));
  const missingDb = birdFolder([{ db_id: "ghost", question: "a", SQL: "select 1" }]);
  assert.throws(() => loadTasks(missingDb), (e) => isT2sError(e, "no_database") && /dev\.json:2/.test(e.message));
  const { file } = platinumFile(['{"db_id": "pets_1", "question": "a", "SQL": "select 1"}', "{broken"]);
  assert.throws(() => loadTasks(file, { format: "platinum" }), (e) => isT2sError(e, "bad_jsonl") && e.message.includes(`${file}:2`));
  const { file: badMethod } = platinumFile(['{"db_id": "pets_1", "question": "a", "SQL": "select 1", "grading_method": "fuzzy"}']);
  assert.throws(() => loadTasks(badMethod), (e) => isT2sError(e, "bad_task") && /grading_method/.test(e.message) && e.message.includes(`${badMethod}:1`));
});

test("a JSON array that is cut off is reported", () => {
  const f = join(scratchDir(), "cut.json");
  writeFileSync(f, '[\n {"a": 1},\n {"a": 2');
  assert.throws(() => readJsonArray(f), (e) => isT2sError(e, "bad_json") && /not closed/.test(e.message));
  writeFileSync(f, '[\n {"a": "x]"},\n 3\n]');
  assert.deepEqual(readJsonArray(f).map((r) => [r.line, r.value]), [[2, { a: "x]" }], [3, 3]]);
});

test("a missing database skips its tasks with a count and a list, or is an error with strict", () => {
  const dir = birdFolder([
    { db_id: "pets_1", question: "a", SQL: "select 1" },
    { db_id: "ghost", question: "b", SQL: "select 1" },
    { db_id: "ghost", question: "c", SQL: "select 2" },
  ]);
  const loaded = loadTaskSource(dir);
  assert.deepEqual(loaded.tasks.map((t) => t.question), ["a"]);
  assert.deepEqual(loaded.missing.map((m) => [m.db_id, m.tasks]), [["ghost", 2]]);
  assert.match(describeMissing(loaded.missing), /skipped 2 tasks of 1 missing database[\s\S]*ghost: 2 tasks \(no file at .*ghost\.sqlite\)/);
  assert.throws(() => loadTaskSource(dir, { strict: true }), (e) => isT2sError(e, "no_database") && /ghost/.test(e.message));
});
