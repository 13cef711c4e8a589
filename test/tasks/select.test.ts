import { test } from "node:test";
import assert from "node:assert/strict";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { passRates, sampleTasks, selectBand, selectTasks } from "../../lib/tasks/select.js";
import { runCli, scratchDir } from "../helpers.js";
import { isT2sError } from "../../lib/core/errors.js";
import { readRows } from "../../lib/report/rows.js";
import { bandSelection } from "../../lib/report/notebook-steps.js";
import type { Task } from "../../lib/tasks/types.js";

function rowsFile(rows: Array<Record<string, unknown>>): string {
  const p = join(scratchDir(), "rows.jsonl");
  writeFileSync(p, rows.map((r) => JSON.stringify(r)).join("\n") + "\n");
  return p;
}

test("pass rates are pooled over samples and eval runs", () => {
  const rates = passRates([
    { task_id: "a", sample: 0, eval_run: "r1", correct: true },
    { task_id: "a", sample: 1, eval_run: "r1", correct: false },
    { task_id: "a", sample: 0, eval_run: "r2", correct: 1 },
    { task_id: "b", sample: 0, correct: 0 },
  ]);
  assert.deepEqual(rates.get("a"), { task_id: "a", rows: 3, correct: 2, rate: 2 / 3 });
  assert.equal(rates.get("b")!.rate, 0);
});

test("the band keeps tasks with lo <= rate <= hi, bounds included", () => {
  const rows: Array<Record<string, unknown>> = [];
  const add = (id: string, k: number, n: number) => { for (let i = 0; i < n; i++) rows.push({ task_id: id, sample: i, correct: i < k }); };
  add("never", 0, 10);
  add("tenth", 1, 10);
  add("half", 5, 10);
  add("nine", 9, 10);
  add("always", 10, 10);
  const { taskIds } = selectBand(rowsFile(rows), 0.1, 0.9);
  assert.deepEqual(taskIds, ["half", "nine", "tenth"]);
  assert.deepEqual(selectBand(rowsFile(rows), 0.2, 0.8).taskIds, ["half"]);
});

test("bad rows and bad bands are errors naming the problem", () => {
  assert.throws(() => passRates([{ task_id: "a" }], "f.jsonl"), (e) => isT2sError(e, "bad_row") && /f\.jsonl\[0\]/.test(e.message));
  assert.throws(() => selectBand(rowsFile([{ task_id: "a", correct: true }]), 0.9, 0.1), (e) => isT2sError(e, "bad_band"));
  assert.throws(() => selectBand("/nonexistent/rows.jsonl", 0, 1), (e) => isT2sError(e, "not_found"));
});

test("the band is read under the statistics' rules: a repeated sample counts once, as in notebook 02 and t2s report", async () => {
  // task "a": 1 of 4 samples right (0.25), but its right sample 0 was appended 20 more times (a resume copy)
  const rows: Array<Record<string, unknown>> = [];
  for (let s = 0; s < 4; s++) rows.push({ task_id: "a", sample: s, correct: s === 0 });
  for (let i = 0; i < 20; i++) rows.push({ task_id: "a", sample: 0, correct: true });
  for (let s = 0; s < 4; s++) rows.push({ task_id: "b", sample: s, correct: s < 3 });
  const file = rowsFile(rows);
  const band = selectBand(file, 0.1, 0.5);
  assert.deepEqual(band.taskIds, ["a"], "a's rate is 1/4, not 21/24");
  assert.deepEqual(band.rates.get("a"), { task_id: "a", rows: 4, correct: 1, rate: 0.25 });
  assert.match(band.notes.join("\n"), /de-duplicated .*dropped 20 row\(s\)/);
  // notebook 02 shows the band it computes from readRows; the trainer's must be the same
  assert.deepEqual(bandSelection(readRows(file), 0.1, 0.5).taskIds, band.taskIds);
  const report = await runCli(["report", "--rows", file, "--json", "--B", "10"]);
  assert.equal(report.code, 0, report.stderr);
  const json = JSON.parse(report.stdout) as { n_rows: number };
  assert.equal(json.n_rows, [...band.rates.values()].reduce((n, r) => n + r.rows, 0), "the band counts the rows the report counts");
  const tasks = ["a", "b", "c"].map((id) => ({ id, split: "train" }) as Task);
  assert.deepEqual(selectTasks(tasks, "train", undefined, { rows: file, lo: 0.1, hi: 0.5 }).map((t) => t.id), ["a"]);
});

test("a band rows file that mixes runs is refused, numeric task ids are read as text, an empty file has no band", () => {
  const mixed = rowsFile([
    { task_id: "a", sample: 0, correct: true, model: "base" },
    { task_id: "a", sample: 1, correct: false, model: "round-1" },
  ]);
  assert.throws(() => selectBand(mixed, 0, 1), (e) => isT2sError(e, "mixed_runs") && e.message.includes(mixed));
  const numeric = rowsFile([{ task_id: 7, sample: 0, correct: 1 }, { task_id: 7, sample: 1, correct: 0 }]);
  assert.deepEqual(selectBand(numeric, 0.1, 0.9).taskIds, ["7"]);
  const empty = join(scratchDir(), "empty.jsonl");
  writeFileSync(empty, "");
  assert.throws(() => selectBand(empty, 0, 1), (e) => isT2sError(e, "no_rows"));
});

test("a sampled subset: n tasks drawn by seed, in file order, the same for the same seed; all of them when n is not smaller", () => {
  const tasks = Array.from({ length: 40 }, (_, i) => ({ id: `t${String(i).padStart(2, "0")}` }) as Task);
  const a = sampleTasks(tasks, 15, 1);
  assert.equal(a.length, 15);
  assert.deepEqual(a, sampleTasks(tasks, 15, 1));
  assert.notDeepEqual(a, sampleTasks(tasks, 15, 2));
  assert.deepEqual(a.map((t) => t.id), [...a.map((t) => t.id)].sort(), "kept in file order");
  assert.notDeepEqual(a, tasks.slice(0, 15), "not the first n");
  assert.equal(sampleTasks(tasks, 40, 1), tasks);
  assert.equal(sampleTasks(tasks, 99, 1), tasks);
});

