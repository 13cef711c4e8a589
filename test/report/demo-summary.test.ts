import { test } from "node:test";
import assert from "node:assert/strict";
import { join } from "node:path";
import { scratchDir } from "../helpers.js";
import { makeRows, writeRows } from "./fixtures.js";
import { deltaNotebookParams, demoCandidates, demoSummaryLines } from "../../lib/report/demo-summary.js";
import { pairedDelta } from "../../lib/stats/delta.js";
import { readStatRows } from "../../lib/stats/rows.js";

test("the demo summary shows the live continuation, labelled, and the shipped round's paired delta with its interval", () => {
  const dir = scratchDir("t2s-demo-summary-");
  const base = writeRows(join(dir, "base.jsonl"), makeRows());
  const live = writeRows(join(dir, "live.jsonl"), makeRows({ seed: 1 }));
  const shipped = writeRows(join(dir, "shipped.jsonl"), makeRows({ lift: 0.3, seed: 5 }));
  const lines = demoSummaryLines({
    baseRows: base,
    candidates: [
      { label: "live continuation (2 CPU steps)", rows: live, note: "not expected to move the holdout" },
      { label: "shipped round 1", rows: shipped, note: "one full GRPO round" },
    ],
    heading: "demo finished in 1m00s (short CPU configuration)",
  });
  const text = lines.join("\n");
  assert.match(text, /^base\s+24 /m);
  assert.match(text, /^live continuation \(2 CPU steps\)\s+24 /m);
  const d = pairedDelta(readStatRows(base).rows, readStatRows(shipped).rows);
  const pts = (x: number) => `${x > 0 ? "+" : ""}${(100 * x).toFixed(1)}`;
  const row = text.split("\n").find((l) => l.startsWith("shipped round 1") && l.includes(d.verdict));
  assert.ok(row, text);
  assert.ok(row!.includes(pts(d.delta!)) && row!.includes(`[${pts(d.ci![0])}, ${pts(d.ci![1])}]`), `delta ${pts(d.delta!)} and its interval in: ${row}`);
  assert.ok(d.delta! > 0.15, "the fixture's lift shows");
  assert.match(text, /^live continuation \(2 CPU steps\): not expected to move the holdout$/m);
});

test("the demo leads with the shipped round: first in the summary and notebook 05's headline (b), the live continuation after it (c)", () => {
  const dir = scratchDir("t2s-demo-order-");
  const base = writeRows(join(dir, "base.jsonl"), makeRows());
  const live = { label: "live continuation (2 CPU steps)", rows: writeRows(join(dir, "live.jsonl"), makeRows({ seed: 1 })), note: "short" };
  const shipped = { label: "shipped round 1", rows: writeRows(join(dir, "shipped.jsonl"), makeRows({ lift: 0.3, seed: 5 })), note: "full round" };
  const candidates = demoCandidates(live, shipped);
  assert.deepEqual(deltaNotebookParams(base, candidates), { a: base, b: shipped.rows, label_b: shipped.label, c: live.rows, label_c: live.label });
  const text = demoSummaryLines({ baseRows: base, candidates, heading: "h" }).join("\n");
  assert.ok(text.indexOf("shipped round 1") < text.indexOf("live continuation"), text);
  // without a shipped round the live continuation is the headline
  assert.deepEqual(deltaNotebookParams(base, demoCandidates(live, null)), { a: base, b: live.rows, label_b: live.label });
});
