import { test } from "node:test";
import assert from "node:assert/strict";
import { appendFileSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { RowsStore } from "../../lib/runs/store.js";
import type { RolloutRow } from "../../lib/runs/row.js";
import { parseJsonl } from "../../lib/core/jsonl.js";
import { scratchDir } from "../helpers.js";

const row = (task_id: string, sample: number, eval_run = "1") => ({ task_id, sample, eval_run, run_id: "r", correct: true }) as unknown as RolloutRow;

test("rows append one line each and are read back", () => {
  const path = join(scratchDir(), "rows.jsonl");
  const { store } = RowsStore.open(path);
  store.append(row("a", 0));
  store.append(row("a", 1));
  const again = RowsStore.open(path);
  assert.equal(again.store.rows.length, 2);
  assert.ok(again.store.has("1", "a", 1));
  assert.ok(!again.store.has("2", "a", 1));
  assert.throws(() => again.store.append(row("a", 1)), /already holds a sample 1/);
});

test("a torn last line is cut off on open so the next append keeps the file valid", () => {
  const path = join(scratchDir(), "rows.jsonl");
  writeFileSync(path, JSON.stringify(row("a", 0)) + "\n" + '{"task_id":"a","sam');
  const { store, tornBytes } = RowsStore.open(path);
  assert.equal(tornBytes, '{"task_id":"a","sam'.length);
  assert.equal(store.rows.length, 1);
  store.append(row("a", 1));
  const parsed = parseJsonl<RolloutRow>(readFileSync(path, "utf8"), path);
  assert.equal(parsed.tornTail, false);
  assert.deepEqual(parsed.records.map((r) => r.sample), [0, 1]);
});

test("a complete last record missing only its newline is kept and the line finished", () => {
  const path = join(scratchDir(), "rows.jsonl");
  writeFileSync(path, JSON.stringify(row("a", 0)) + "\n" + JSON.stringify(row("b", 0)));
  const { store, tornBytes } = RowsStore.open(path);
  assert.equal(tornBytes, 0);
  assert.equal(store.rows.length, 2);
  store.append(row("c", 0));
  assert.equal(readFileSync(path, "utf8").split("\n").filter(Boolean).length, 3);
});

test("duplicates in the file are counted and ignored; a malformed middle line is an error naming the line", () => {
  const dir = scratchDir();
  const dup = join(dir, "dup.jsonl");
  writeFileSync(dup, [row("a", 0), row("a", 0), row("a", 0, "2")].map((r) => JSON.stringify(r)).join("\n") + "\n");
  const o = RowsStore.open(dup);
  assert.equal(o.duplicates, 1);
  assert.equal(o.store.rows.length, 2);
  const bad = join(dir, "bad.jsonl");
  writeFileSync(bad, JSON.stringify(row("a", 0)) + "\n{broken\n" + JSON.stringify(row("a", 1)) + "\n");
  const before = readFileSync(bad, "utf8");
  assert.throws(() => RowsStore.open(bad), /bad\.jsonl:2: malformed JSON/);
  assert.equal(readFileSync(bad, "utf8"), before);
  const notRow = join(dir, "notrow.jsonl");
  appendFileSync(notRow, '{"x":1}\n');
  assert.throws(() => RowsStore.open(notRow), /line 1 is not a rollout row/);
});
