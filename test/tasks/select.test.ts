import { test } from "node:test";
import assert from "node:assert/strict";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { passRates, selectBand } from "../../lib/tasks/select.js";
import { scratchDir } from "../helpers.js";
import { isT2sError } from "../../lib/core/errors.js";

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
  assert.throws(() => passRates([{ task_id: "a" }], "f.jsonl"), (e) => isT2sError(e, "bad_rows") && /f\.jsonl: record 1/.test(e.message));
  assert.throws(() => selectBand(rowsFile([{ task_id: "a", correct: true }]), 0.9, 0.1), (e) => isT2sError(e, "bad_band"));
  assert.throws(() => selectBand("/nonexistent/rows.jsonl", 0, 1), (e) => isT2sError(e, "not_found"));
});
