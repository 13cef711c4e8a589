import { test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { bandSelection, writeBand, benchmarkStep, policyModelDir, trainConfigFacts, holdoutCheckpoints, benchmarkBanner } from "../../lib/report/notebook-steps.js";
import { checkTrainerAgreement, checkAdapterNotNoop, checkGradedTurn, checksHtml, checksTable } from "../../lib/report/serving.js";
import { selectBand } from "../../lib/tasks/select.js";
import { T2sError } from "../../lib/core/errors.js";
import { scratchDir } from "../helpers.js";
import { makeRows, makeTrainLog, writeRows } from "./fixtures.js";

const rows = makeRows({ k: 8 });

test("band selection keeps what the trainer keeps and says why the rest is dropped", () => {
  const dir = scratchDir();
  const path = writeRows(join(dir, "rows.jsonl"), rows);
  const band = bandSelection(rows, 0.1, 0.9);
  assert.deepEqual(band.taskIds, selectBand(path, 0.1, 0.9).taskIds);
  const counts = Object.fromEntries((band.table.objects() as Array<{ rule: string; tasks: number }>).map((o) => [o.rule, o.tasks]));
  assert.equal(Object.values(counts).reduce((a, b) => a + b, 0), 24);
  assert.equal(counts["kept (in band)"], band.taskIds.length);
  const rates = band.tasks.objects() as Array<{ rate: number; rule: string }>;
  assert.equal(counts["dropped: always right"], rates.filter((r) => r.rate === 1).length);
  assert.equal(counts["dropped: always wrong"], rates.filter((r) => r.rate === 0).length);
  assert.ok(counts["dropped: always right"] + counts["dropped: always wrong"] > 0);
  const w = writeBand(join(dir, "band"), path, band);
  assert.deepEqual(readFileSync(w.ids, "utf8").trim().split("\n"), band.taskIds);
  assert.equal(JSON.parse(readFileSync(w.json, "utf8")).lo, 0.1);
  assert.deepEqual(JSON.parse(w.configSnippet), { band: { rows: path, lo: 0.1, hi: 0.9 } });
  assert.throws(() => bandSelection(rows, 0.9, 0.1), /must satisfy/);
});

test("benchmark step: a missing model stops with what to do, or reads a labelled fallback file", async () => {
  assert.equal(policyModelDir("tfjs:data/models/x+adapter"), "data/models/x");
  assert.equal(policyModelDir("openai:m@http://h/v1"), null);
  const dir = scratchDir();
  await assert.rejects(benchmarkStep({ policy: `tfjs:${join(dir, "no-model")}`, out: join(dir, "r.jsonl") }), (e: unknown) => {
    assert.ok(e instanceof T2sError);
    assert.equal(e.code, "no_model");
    assert.match(e.message, /does not exist.*--param policy=openai.*--param fallback_rows=.*--param rows_path=/s);
    return true;
  });
  const file = writeRows(join(dir, "old.jsonl"), rows);
  const step = await benchmarkStep({ policy: `tfjs:${join(dir, "no-model")}`, out: join(dir, "r.jsonl"), fallbackRows: file });
  assert.equal(step.source, "fallback");
  assert.match(step.label, /^FALLBACK: rows read from/);
  assert.equal(step.rows.length, rows.length);
  assert.equal(step.command, null);
  assert.match(benchmarkBanner(step), /data-source="fallback"/);
});

test("train config facts resolve paths against the config's folder", () => {
  const dir = scratchDir();
  const cfg = join(dir, "c.json");
  writeFileSync(cfg, JSON.stringify({ model: "m", output_dir: "out/x", steps: 3 }));
  const f = trainConfigFacts(cfg);
  assert.equal(f.model, join(dir, "m"));
  assert.equal(f.output_dir, join(dir, "out/x"));
  assert.equal(f.steps, 3);
  assert.throws(() => trainConfigFacts(join(dir, "none.json")), /does not exist/);
  const t = holdoutCheckpoints(makeTrainLog(6));
  assert.deepEqual(t.array("step"), [3, 6]);
});

test("serving checks: PASS, FAIL and SKIP with reasons", () => {
  const log = makeTrainLog(6);
  const served = makeRows({ tasks: 12, k: 1 }).map((r) => ({ ...r, reward: 0.55 }));
  const ok = checkTrainerAgreement(served, log);
  assert.equal(ok.status, "PASS", ok.reason);
  assert.equal(checkTrainerAgreement(served.map((r) => ({ ...r, reward: 0 })), log).status, "FAIL");
  assert.equal(checkTrainerAgreement([], log).status, "SKIP");
  const base = served.map((r) => ({ ...r }));
  const noop = checkAdapterNotNoop(served, base);
  assert.equal(noop.status, "FAIL");
  assert.match(noop.reason, /identical/);
  const changed = served.map((r, i) => (i === 0 ? { ...r, turns: [{ role: "assistant" as const, content: "different" }] } : r));
  assert.equal(checkAdapterNotNoop(changed, base).status, "PASS");
  assert.equal(checkGradedTurn(served).status, "PASS");
  const second = served.map((r, i) => (i === 2 ? { ...r, graded_turn: 2, n_assistant_turns: 2 } : r));
  const bad = checkGradedTurn(second);
  assert.equal(bad.status, "FAIL");
  assert.match(bad.reason, /1 of 12 rows graded another turn/);
  assert.equal(checkGradedTurn(second, "tool").status, "PASS");
  const html = checksHtml([ok, noop]);
  assert.match(html, /FAIL: 1 of 2 checks failed/);
  assert.equal(checksTable([ok, noop]).numRows(), 2);
});
