/**
 * Executes the research notebooks headless with small parameters (a scripted policy over four shop tasks,
 * small generated rows files, 200 bootstrap resamples) and checks that every table and figure each one promises is in its HTML report
 * and saved in the report folder, and that the figures draw offline.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync, writeFileSync, existsSync, readdirSync } from "node:fs";
import { join } from "node:path";
import { readTasks } from "../../lib/tasks/io.js";
import { HANG_GUARD_MS, needsChromium, runCli, scratchDir } from "../helpers.js";
import { inspectReport } from "../notebooks/browser.js";
import { makeRows, writeRows } from "../report/fixtures.js";

const EXPECTED: Record<string, { figures: string[]; tables: string[] }> = {
  "01-benchmark": {
    figures: ["pass1-by-difficulty", "pass1-by-archetype", "outcome-by-difficulty", "outcome-by-archetype"],
    tables: ["source", "headline", "by-difficulty", "by-archetype", "failure-counts", "failure-sample"],
  },
  "02-headroom": {
    figures: ["passk-curve", "passk-curve-by-difficulty", "passk-curve-by-archetype", "task-pass-rate-histogram", "headroom-by-difficulty", "headroom-by-archetype"],
    tables: ["source", "headroom-by-difficulty", "band-rules"],
  },
  "05-paired-delta": { figures: ["forest", "pass-shift"], tables: ["delta", "run-deltas", "group-deltas", "markers"] },
};

/** A scripted policy over the first four holdout shop tasks: right, wrong rows, SQL error, no SQL. */
function writeScript(dir: string): string {
  const tasks = readTasks("data/shop/tasks.jsonl").filter((t) => t.split === "holdout").slice(0, 4);
  const reply = (i: number, gold: string) => ["```sql\n" + gold + "\n```", "```sql\nSELECT 1\n```", "```sql\nSELEC broken\n```", "I do not know."][i % 4];
  const path = join(dir, "script.jsonl");
  writeFileSync(path, tasks.map((t, i) => JSON.stringify({ match: t.question, replies: [reply(i, t.gold_sql)] })).join("\n") + "\n");
  return path;
}

const report = join(scratchDir("t2s-nb-research-"), "report");

test("notebooks 01, 02 and 05 run headless and show every table and figure", async () => {
  const dir = join(report, "..");
  // small on purpose: the real-size runs are `npm start` and the benches
  const train = writeRows(join(dir, "train.jsonl"), makeRows({ tasks: 12, k: 4 }).map((r) => ({ ...r, split: "train" })));
  const a = writeRows(join(dir, "a.jsonl"), makeRows({ tasks: 12, runs: 2 }));
  const b = writeRows(join(dir, "b.jsonl"), makeRows({ tasks: 12, runs: 2, lift: 0.25, seed: 9 }));
  const params = {
    policy: `scripted:${writeScript(dir)}`, limit: "4", k: "2", out: join(dir, "rows.jsonl"), report_dir: report, failure_samples: "2",
    rows_path: train, band_dir: join(dir, "band"),
    a, b, B: "200",
  };
  const args = ["notebooks", "run", ...Object.keys(EXPECTED), "--out", report, "--json", "--timeout-ms", String(HANG_GUARD_MS)];
  for (const [k, v] of Object.entries(params)) args.push("--param", `${k}=${v}`);
  const r = await runCli(args, { timeoutMs: Object.keys(EXPECTED).length * HANG_GUARD_MS });
  assert.equal(r.code, 0, r.stdout + r.stderr);
  const results = JSON.parse(r.stdout) as Array<{ name: string; ok: boolean; html: string }>;
  assert.deepEqual(results.map((x) => [x.name, x.ok]), Object.keys(EXPECTED).map((n) => [n, true]));

  const saved = readdirSync(join(report, "figures"));
  for (const res of results) {
    const html = readFileSync(res.html, "utf8");
    const prefix = res.name.slice(0, 2);
    for (const f of EXPECTED[res.name].figures) {
      assert.ok(html.includes(`data-t2s-figure="${prefix}-${f}"`), `${res.name}: figure ${f}`);
      assert.ok(saved.includes(`${prefix}-${f}.json`), `${res.name}: saved figure ${f}`);
    }
    for (const t of EXPECTED[res.name].tables) assert.ok(html.includes(`data-t2s-table="${prefix}-${t}"`), `${res.name}: table ${t}`);
    assert.doesNotMatch(html, /class="[^"]*error/);
  }

  const nb01 = readFileSync(join(report, "01-benchmark.html"), "utf8");
  assert.ok(nb01.includes('data-source="benchmark"'));
  assert.match(nb01, /want \(gold SQL\)/); // got-vs-want re-executed
  assert.match(nb01, /sql_error|no_sql|wrong_rows/);
  assert.ok(existsSync(join(dir, "band", "band_ids.txt")));
});

test("notebook 01's report draws its four figures offline", { skip: needsChromium() }, async () => {
  const facts = await inspectReport(join(report, "01-benchmark.html"));
  assert.deepEqual(facts.errors, []);
  assert.equal(facts.figures, 4);
});
