import { test } from "node:test";
import assert from "node:assert/strict";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { runCli, scratchDir } from "../helpers.js";
import { readRows } from "../../lib/report/rows.js";
import { groupTable, headlineTable } from "../../lib/report/tables.js";
import { toJsonl } from "../../lib/core/jsonl.js";

// numeric task ids, an empty-string group, a numeric group value and a missing one, correct as 0/1 and booleans
const rows = Array.from({ length: 8 }, (_, t) => Array.from({ length: 3 }, (_, s) => ({
  task_id: t,
  sample: s,
  correct: (t + s) % 3 === 0 ? (s % 2 ? 1 : true) : (s % 2 ? 0 : false),
  ...(t < 2 ? { difficulty: "" } : t < 4 ? { difficulty: 2 } : t < 6 ? {} : { difficulty: "hard" }),
}))).flat();

test("t2s report and the notebook tables read and group one rows file identically, numeric and empty fields included", async () => {
  const file = join(scratchDir(), "rows.jsonl");
  writeFileSync(file, toJsonl(rows));
  const cli = await runCli(["report", "--rows", file, "--by", "difficulty", "--B", "200", "--json"]);
  assert.equal(cli.code, 0, cli.stderr);
  const report = JSON.parse(cli.stdout);
  const read = readRows(file);
  assert.equal(read.length, rows.length, "numeric task ids are rows, not errors");
  const head = headlineTable(read, { B: 200 }).objects()[0] as Record<string, number>;
  assert.equal(head.tasks, report.n_tasks);
  assert.equal(head.pass1, report.pass1);
  const groups = Object.fromEntries((groupTable(read, "difficulty", { B: 200 }).objects() as Record<string, number | string>[]).map((g) => [g.difficulty, g]));
  assert.deepEqual(Object.keys(groups).sort(), Object.keys(report.by.difficulty).sort());
  assert.deepEqual(Object.keys(report.by.difficulty).sort(), ["(missing)", "2", "hard"], "\"\" and absent are one group");
  for (const [key, g] of Object.entries(report.by.difficulty) as [string, { n_tasks: number; n_rows: number; pass1: number }][]) {
    assert.equal(groups[key].tasks, g.n_tasks, key);
    assert.equal(groups[key].rows, g.n_rows, key);
    assert.equal(groups[key].pass1, g.pass1, key);
  }
});
