// On the real Spider dev subset in ../shared/spider-dev-mini (read in place, never copied): skipped when absent.
import { test } from "node:test";
import assert from "node:assert/strict";
import { existsSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { HANG_GUARD_MS, repoRoot, runCli, scratchDir } from "../helpers.js";

const SPIDER = join(repoRoot, "..", "shared", "spider-dev-mini");
const skip = existsSync(join(SPIDER, "dev.json")) ? false : "../shared/spider-dev-mini is not here";

test("tasks verify --mode eval keeps at least 955 of the 972 dev golds and names every drop's reason", { skip }, async () => {
  const out = join(scratchDir("t2s-spider-dev-"), "kept.jsonl");
  const r = await runCli(["tasks", "verify", SPIDER, "--mode", "eval", "--json", "--out", out], { timeoutMs: HANG_GUARD_MS });
  const report = JSON.parse(r.stdout);
  assert.equal(report.total, 972);
  assert.ok(report.kept >= 955, `kept ${report.kept}`);
  assert.equal(report.drops.length, report.dropped);
  for (const d of report.drops) assert.ok(d.reason && d.detail, JSON.stringify(d));
  // a policy that answers every question with its gold passes every kept task
  const kept = readFileSync(out, "utf8").trim().split("\n").map((l) => JSON.parse(l));
  assert.ok(kept.every((t) => t.dialect === "spider" && ["easy", "medium", "hard", "extra"].includes(t.difficulty)));
  const script = join(scratchDir("t2s-spider-script-"), "script.jsonl");
  // longest questions first, so a question that is part of a longer one cannot take its reply
  const byQuestion = [...kept].sort((a, b) => b.question.length - a.question.length);
  writeFileSync(script, byQuestion.map((t) => JSON.stringify({ match: t.question, replies: ["```sql\n" + t.gold_sql + "\n```"] })).join("\n") + "\n");
  const rows = join(scratchDir("t2s-spider-rows-"), "rows.jsonl");
  const b = await runCli(["benchmark", "--policy", `scripted:${script}`, "--tasks", out, "--out", rows, "--k", "1", "--quiet", "--json"], { timeoutMs: HANG_GUARD_MS });
  assert.equal(b.code, 0, b.stderr);
  const summary = JSON.parse(b.stdout).summary;
  assert.equal(summary.n_tasks, kept.length);
  assert.equal(summary.pass1, 1);
  const written = readFileSync(rows, "utf8").trim().split("\n").map((l) => JSON.parse(l));
  assert.equal(written.length, kept.length);
  assert.ok(written.every((row) => row.correct), "every kept task passes with its gold");
  const meta = JSON.parse(readFileSync(`${rows}.meta.json`, "utf8"));
  assert.deepEqual(meta.grading.dialects, { spider: kept.length });
});

test("on test-suite-sql-eval's 322 example pairs, grade --dialect spider equals the official exec verdicts", { skip }, async () => {
  const pairs = readFileSync(join(SPIDER, "kit-vs-testsuite.jsonl"), "utf8").trim().split("\n").map((l) => JSON.parse(l));
  assert.equal(pairs.length, 322);
  const input = pairs.map((p) => JSON.stringify({ db: join(SPIDER, "database", p.db_id, `${p.db_id}.sqlite`), gold: p.gold, pred: p.pred, reply: false })).join("\n") + "\n";
  for (const [flags, official] of [[[], "testsuite_exec_keep_distinct"], [["--distinct", "ignore"], "testsuite_exec"]] as const) {
    const r = await runCli(["grade", "--jsonl", "--dialect", "spider", ...flags], { input, timeoutMs: HANG_GUARD_MS });
    assert.equal(r.code, 0, r.stderr);
    const answers = r.stdout.trim().split("\n").map((l) => JSON.parse(l));
    const differ = pairs.filter((p, i) => Boolean(answers[i].correct) !== Boolean(p[official]));
    assert.deepEqual(differ.map((p) => p.i), [], `${official}: ${JSON.stringify(differ.slice(0, 2))}`);
  }
});
