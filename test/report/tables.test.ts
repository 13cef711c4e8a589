import { test } from "node:test";
import assert from "node:assert/strict";
import { headlineTable, groupTable, outcomeTable, rowsTable, failureRates, tableHtml } from "../../lib/report/tables.js";
import { summarize } from "../../lib/stats/summary.js";
import { readRows, outcomeOf, groupsIn } from "../../lib/report/rows.js";
import { scratchDir } from "../helpers.js";
import { makeRows, writeRows } from "./fixtures.js";
import { join } from "node:path";
import { writeFileSync } from "node:fs";
import type { StatRow } from "../../lib/stats/rows.js";

const rows = makeRows({ runs: 2 });

test("headline table carries lib/stats numbers and failure shares", () => {
  const t = headlineTable(rows, { label: "m" });
  const [h] = t.objects() as Array<Record<string, number | string | null>>;
  const s = summarize(rows as unknown as StatRow[], {});
  assert.equal(h.model, "m");
  assert.equal(h.pass1, s.pass1);
  assert.equal(h.pass1_lo, s.pass1_ci![0]);
  assert.equal(h.pass1_hi, s.pass1_ci![1]);
  assert.equal(h.passk, s.passk);
  assert.equal(h.powk, s.powk);
  assert.equal(h.k, 4);
  const noSql = rows.filter((r) => r.has_sql === false).length / rows.length;
  assert.equal(h.no_sql, noSql);
  assert.equal(h.truncated, rows.filter((r) => r.finish_reason === "length").length / rows.length);
  assert.ok((h.tokens_per_reply as number) >= 20 && (h.tokens_per_reply as number) <= 24);
});

test("group table has one row per group in easy/medium/hard order", () => {
  const t = groupTable(rows, "difficulty");
  assert.deepEqual(t.array("difficulty"), ["easy", "medium", "hard"]);
  const tasks = t.array("tasks") as number[];
  assert.equal(tasks.reduce((a, b) => a + b, 0), 24);
});

test("outcome table shares sum to 1 per group", () => {
  const t = outcomeTable(rows, "archetype");
  for (const g of groupsIn(rows, "archetype")) {
    const shares = (t.objects() as Array<Record<string, unknown>>).filter((o) => o.archetype === g).map((o) => o.share as number);
    assert.ok(Math.abs(shares.reduce((a, b) => a + b, 0) - 1) < 1e-9);
  }
});

test("failure rates and outcome derivation without an outcome field", () => {
  const bare = [
    { task_id: "a", sample: 0, correct: true },
    { task_id: "a", sample: 1, correct: false, has_sql: false },
    { task_id: "b", sample: 0, correct: false, has_sql: true, executes: false },
    { task_id: "b", sample: 1, correct: 0 as const, has_sql: true, executes: true },
  ];
  assert.deepEqual(bare.map(outcomeOf), ["correct", "no_sql", "sql_error", "wrong_rows"]);
  const f = failureRates(bare);
  assert.equal(f.no_sql, 0.25);
  assert.equal(f.sql_error, 0.25);
  assert.equal(f.tokens_per_reply, null);
});

test("tableHtml shows the interval as one column and names the table", () => {
  const html = tableHtml(headlineTable(rows), { name: "headline", title: "Headline" });
  assert.match(html, /data-t2s-table="headline"/);
  assert.match(html, /<th>95% CI<\/th>/);
  assert.match(html, /<th>pass@4<\/th>/);
  assert.match(html, /\[0\.\d{3}, 0\.\d{3}\]/);
  assert.doesNotMatch(html, /CI high/);
});

test("rowsTable flattens rows for ad-hoc queries", () => {
  const t = rowsTable(rows);
  assert.equal(t.numRows(), rows.length);
  assert.ok(t.columnNames().includes("outcome"));
  assert.ok(!t.columnNames().includes("turns"));
});

test("readRows names the file for missing, malformed and empty input", () => {
  const dir = scratchDir();
  assert.throws(() => readRows(join(dir, "none.jsonl")), /does not exist/);
  const bad = join(dir, "bad.jsonl");
  writeFileSync(bad, '{"task_id":"a","sample":0,"correct":true}\n{oops\n{"x":1}\n');
  assert.throws(() => readRows(bad), /bad\.jsonl/);
  const empty = join(dir, "empty.jsonl");
  writeFileSync(empty, "");
  assert.throws(() => readRows(empty), /no rows/);
  assert.equal(readRows(writeRows(join(dir, "ok.jsonl"), rows)).length, rows.length);
});
