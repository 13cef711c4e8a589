import { test } from "node:test";
import assert from "node:assert/strict";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { runCli, scratchDir } from "../helpers.js";
import { simulateRows } from "./fixtures.js";
import { summarize } from "../../lib/stats/summary.js";
import { pairedDelta } from "../../lib/stats/delta.js";
import { toJsonl } from "../../lib/core/jsonl.js";

const dir = scratchDir("t2s-stats-");
const fields = (i: number) => ({ difficulty: ["easy", "hard"][i % 2] });
const rates = Array.from({ length: 12 }, (_, i) => (i % 6) / 6);
const rowsA = simulateRows({ rates, samples: 4, runs: 2, seed: 1, fields, sampleFields: (c, r) => ({ executes: c || r() < 0.5, has_sql: true }) });
const rowsB = simulateRows({ rates: rates.map((p) => Math.min(1, p + 0.3)), samples: 4, runs: 2, seed: 2, fields, sampleFields: (c) => ({ executes: true, has_sql: c || true }) });
const fileA = join(dir, "a.jsonl");
const fileB = join(dir, "b.jsonl");
writeFileSync(fileA, toJsonl(rowsA));
writeFileSync(fileB, toJsonl(rowsB));

const REPORT_KEYS = ["n_tasks", "n_rows", "k", "pass1", "pass1_ci", "passk", "passk_ci", "powk", "powk_ci", "headroom"];
const DELTA_KEYS = ["n_paired", "delta", "ci", "p", "verdict", "runs_a", "runs_b", "run_deltas", "detectable_effect", "tasks_needed", "markers", "duplicates_dropped", "by", "setup_errors_left_out", "setup_differences"];

test("report --json prints exactly the documented keys, equal to summarize()", async () => {
  const r = await runCli(["report", "--rows", fileA, "--by", "difficulty", "--B", "300", "--json"]);
  assert.equal(r.code, 0, r.stderr);
  const out = JSON.parse(r.stdout);
  assert.deepEqual(Object.keys(out), [...REPORT_KEYS, "by", "duplicates_dropped", "setup_errors_left_out"]);
  assert.deepEqual(Object.keys(out.by.difficulty), ["easy", "hard"]);
  assert.deepEqual(Object.keys(out.by.difficulty.easy), REPORT_KEYS);
  assert.equal(out.n_tasks, 12);
  assert.equal(out.k, 4);
  assert.equal(out.pass1_ci.length, 2);
  assert.deepEqual(out, JSON.parse(JSON.stringify(summarize(rowsA, { by: ["difficulty"], B: 300 }))));
});

test("report prints a readable table", async () => {
  const r = await runCli(["report", "--rows", fileA, "--by", "difficulty", "--k", "2"]);
  assert.equal(r.code, 0, r.stderr);
  assert.match(r.stdout, /^pass@1\s+\d\.\d{3}\s+\[\d\.\d{3}, \d\.\d{3}\]\s+12$/m);
  assert.match(r.stdout, /^pass@2 /m);
  assert.match(r.stdout, /^pass\^2 /m);
  assert.match(r.stdout, /^by difficulty$/m);
  assert.match(r.stdout, /^easy\s+6\s+48 /m);
});

test("delta --json prints exactly the documented keys, equal to pairedDelta()", async () => {
  const r = await runCli(["delta", "--a", fileA, "--b", fileB, "--by", "difficulty", "--B", "300", "--json"]);
  assert.equal(r.code, 0, r.stderr);
  const out = JSON.parse(r.stdout);
  assert.deepEqual(Object.keys(out), DELTA_KEYS);
  assert.deepEqual(Object.keys(out.markers), ["executes", "has_sql"]);
  assert.deepEqual(Object.keys(out.by.difficulty.hard), DELTA_KEYS.filter((k) => k !== "by" && k !== "setup_differences" && k !== "setup_errors_left_out"));
  assert.equal(out.n_paired, 12);
  assert.equal(out.runs_a, 2);
  assert.equal(out.run_deltas.length, 2);
  assert.equal(out.setup_differences.length, 2, "neither file has a sidecar");
  const { setup_differences: _setup, setup_errors_left_out: _refused, ...stats } = out;
  assert.deepEqual(stats, JSON.parse(JSON.stringify(pairedDelta(rowsA, rowsB, { by: ["difficulty"], B: 300 }))));
  const human = await runCli(["delta", "--a", fileA, "--b", fileB, "--B", "300"]);
  assert.equal(human.code, 0, human.stderr);
  assert.match(human.stdout, new RegExp(`^verdict\\s+${out.verdict}$`, "m"));
  assert.match(human.stdout, /^runs\s+replicated \d\/2 above zero/m);
  assert.match(human.stdout, /^executes\s+12 /m);
});

test("a malformed line stops the command naming file:line, unless --skip-bad", async () => {
  const bad = join(dir, "bad.jsonl");
  const lines = toJsonl(rowsA).split("\n");
  lines.splice(3, 0, "{not json");
  lines.splice(6, 0, JSON.stringify({ task_id: "t9", sample: 0 })); // no `correct`
  writeFileSync(bad, lines.join("\n"));
  const r = await runCli(["report", "--rows", bad, "--json"]);
  assert.equal(r.code, 1);
  assert.match(r.stderr, /bad_jsonl/);
  assert.ok(r.stderr.includes(`${bad}:4:`), r.stderr);
  const skipped = await runCli(["report", "--rows", bad, "--json", "--skip-bad"]);
  assert.equal(skipped.code, 0, skipped.stderr);
  assert.match(skipped.stderr, /skipped 2 bad line/);
  assert.ok(skipped.stderr.includes(`${bad}:7: correct must be`), skipped.stderr);
  assert.equal(JSON.parse(skipped.stdout).n_rows, rowsA.length);
  const rowOnly = join(dir, "row.jsonl");
  writeFileSync(rowOnly, toJsonl([...rowsA.slice(0, 2), { task_id: "t9", sample: 0, correct: "yes" }]));
  const r2 = await runCli(["delta", "--a", fileA, "--b", rowOnly]);
  assert.equal(r2.code, 1);
  assert.ok(r2.stderr.includes(`${rowOnly}:3: correct must be true, false, 0 or 1`), r2.stderr);
});

test("bad flag values exit 2; an empty file is an error", async () => {
  const r = await runCli(["report", "--rows", fileA, "--k", "0"]);
  assert.equal(r.code, 2);
  assert.match(r.stderr, /--k must be an integer >= 1/);
  const empty = join(dir, "empty.jsonl");
  writeFileSync(empty, "");
  const e = await runCli(["report", "--rows", empty]);
  assert.equal(e.code, 1);
  assert.match(e.stderr, /no_rows/);
});

test("report and delta de-duplicate repeated (eval run, task, sample) rows and say so", async () => {
  const dup = join(dir, "dup.jsonl");
  writeFileSync(dup, toJsonl([...rowsA, ...rowsA.slice(0, 5), ...rowsA.slice(0, 5)]));
  const clean = JSON.parse((await runCli(["report", "--rows", fileA, "--B", "300", "--json"])).stdout);
  const r = await runCli(["report", "--rows", dup, "--B", "300", "--json"]);
  assert.equal(r.code, 0, r.stderr);
  const out = JSON.parse(r.stdout);
  assert.equal(out.duplicates_dropped, 10);
  assert.deepEqual({ ...out, duplicates_dropped: 0 }, clean, "the copies change no number");
  const human = await runCli(["report", "--rows", dup, "--B", "300"]);
  assert.match(human.stdout, /^de-duplicated .*dup\.jsonl: dropped 10 row\(s\) repeating an earlier \(eval run, task, sample\), the first of each kept \(task t0000 sample 0 eval run 0/m);
  const d = await runCli(["delta", "--a", fileA, "--b", dup, "--B", "300", "--json"]);
  assert.equal(d.code, 0, d.stderr);
  const delta = JSON.parse(d.stdout);
  assert.equal(delta.delta, 0, "a file against itself plus copies moves nothing");
  assert.deepEqual(delta.duplicates_dropped, { a: 0, b: 10 });
  const dh = await runCli(["delta", "--a", fileA, "--b", dup, "--B", "300"]);
  assert.match(dh.stdout, /^de-duplicated .*dup\.jsonl: dropped 10 row/m);
});

test("the library statistics de-duplicate (and say so) or refuse duplicates", async () => {
  const doubled = [...rowsA, rowsA[0], rowsA[1]];
  assert.equal(summarize(doubled, { B: 200 }).duplicates_dropped, 2);
  assert.equal(summarize(doubled, { B: 200 }).pass1, summarize(rowsA, { B: 200 }).pass1);
  const report = pairedDelta(rowsA, doubled, { B: 200 });
  assert.equal(report.delta, 0);
  assert.deepEqual(report.duplicates_dropped, { a: 0, b: 2 });
  const { taskPassRates } = await import("../../lib/stats/summary.js");
  assert.throws(() => taskPassRates(doubled), /duplicate_rows|repeating an \(eval run, task, sample\) key/);
  const { readRows } = await import("../../lib/report/rows.js");
  const dup = join(dir, "dup-lib.jsonl");
  writeFileSync(dup, toJsonl(doubled));
  const warned: string[] = [];
  const warn = console.warn;
  console.warn = (m: string) => warned.push(m);
  try {
    assert.equal(readRows(dup).length, rowsA.length);
  } finally {
    console.warn = warn;
  }
  assert.match(warned.join("\n"), /dropped 2 row/);
});

test("report --by a field no row has is an error naming the fields; k = 1 prints pass@1 once", async () => {
  const r = await runCli(["report", "--rows", fileA, "--by", "nosuchfield"]);
  assert.equal(r.code, 2);
  assert.match(r.stderr, /^error \[usage\]: --by nosuchfield: no row has this field; fields with values: .*difficulty.*task_id/);
  const d = await runCli(["delta", "--a", fileA, "--b", fileB, "--by", "nosuchfield"]);
  assert.equal(d.code, 2);
  const k1 = await runCli(["report", "--rows", fileA, "--k", "1", "--by", "difficulty", "--B", "200"]);
  assert.equal(k1.code, 0, k1.stderr);
  assert.equal(k1.stdout.match(/^pass@1 /gm)?.length, 1, k1.stdout);
  assert.doesNotMatch(k1.stdout, /^(pass\^1|headroom) /m);
});
