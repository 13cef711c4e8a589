import { test } from "node:test";
import assert from "node:assert/strict";
import { existsSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { runCli, scratchDir } from "../helpers.js";
import { makePetsDb, spiderFolder } from "./fixtures.js";

function kitFile(): string {
  const dir = scratchDir();
  makePetsDb(join(dir, "pets.sqlite"));
  const rows = [
    { db_id: "pets", db_path: "pets.sqlite", question: "How many dogs are there in the shelter?", gold_sql: "SELECT COUNT(*) FROM pets WHERE kind = 'dog'", difficulty: "easy", archetype: "aggregation", style: "casual" },
    { db_id: "pets", db_path: "pets.sqlite", question: "Which pets are fish, by name?", gold_sql: "SELECT name FROM pets WHERE kind = 'fish'", difficulty: "easy", archetype: "join_two", style: "terse" },
    { db_id: "pets", db_path: "pets.sqlite", question: "List every pet name with its age, oldest first.", gold_sql: "SELECT name, age FROM pets ORDER BY age DESC, name", difficulty: "medium", archetype: "top_n", style: "formal" },
  ];
  const file = join(dir, "tasks.jsonl");
  writeFileSync(file, rows.map((r) => JSON.stringify(r)).join("\n") + "\n");
  return file;
}

test("tasks verify reports drops by reason, writes the kept set and exits 1 when something dropped", async () => {
  const file = kitFile();
  const out = join(scratchDir(), "kept.jsonl");
  const r = await runCli(["tasks", "verify", file, "--json", "--out", out, "--workers", "1"]);
  assert.equal(r.code, 1, r.stderr);
  const report = JSON.parse(r.stdout);
  assert.equal(report.total, 3);
  assert.equal(report.kept, 2);
  assert.deepEqual(report.by_reason, { empty: 1 });
  assert.equal(readFileSync(out, "utf8").trim().split("\n").length, 2);
});

test("tasks stats and split read Spider folders too", async () => {
  const dir = spiderFolder();
  const s = await runCli(["tasks", "stats", dir, "--json"]);
  assert.equal(s.code, 0, s.stderr);
  const stats = JSON.parse(s.stdout);
  assert.equal(stats.count, 2);
  assert.equal(stats.train + stats.holdout, 2);
  const outDir = scratchDir();
  const sp = await runCli(["tasks", "split", kitFile(), "--out-dir", outDir, "--json"]);
  assert.equal(sp.code, 0, sp.stderr);
  const split = JSON.parse(sp.stdout);
  assert.equal(split.train + split.holdout, 3);
  assert.ok(existsSync(join(outDir, "train.jsonl")) && existsSync(join(outDir, "holdout.jsonl")));
});

test("tasks export writes verl and TRL jsonl with prompt messages and the gold", async () => {
  const out = scratchDir();
  const r = await runCli(["tasks", "export", kitFile(), "--to", "all", "--out", out, "--json"]);
  assert.equal(r.code, 0, r.stderr);
  const lines = (f: string) => (existsSync(f) ? readFileSync(f, "utf8").split("\n").filter(Boolean).map((l) => JSON.parse(l)) : []);
  const verl = [...lines(join(out, "verl", "train.jsonl")), ...lines(join(out, "verl", "test.jsonl"))];
  const trl = [...lines(join(out, "trl", "train.jsonl")), ...lines(join(out, "trl", "test.jsonl"))];
  assert.equal(verl.length, 3);
  assert.equal(trl.length, 3);
  const v = verl.find((x) => x.extra_info.archetype === "aggregation");
  assert.equal(v.reward_model.style, "rule");
  assert.equal(v.reward_model.ground_truth, "SELECT COUNT(*) FROM pets WHERE kind = 'dog'");
  assert.equal(v.prompt[0].role, "system");
  assert.match(v.prompt[0].content, /CREATE TABLE pets/);
  assert.equal(v.prompt[1].content, "How many dogs are there in the shelter?");
  const t = trl.find((x) => x.archetype === "aggregation");
  assert.equal(t.solution, v.reward_model.ground_truth);
  assert.deepEqual(t.prompt, v.prompt);
});

test("usage errors exit 2 and name the problem", async () => {
  const r = await runCli(["tasks", "author", "nowhere"]);
  assert.equal(r.code, 2);
  assert.match(r.stderr, /unknown author target/);
  const e = await runCli(["tasks", "export", kitFile(), "--to", "parquet"]);
  assert.equal(e.code, 2);
  assert.match(e.stderr, /--to must be/);
  const t = await runCli(["tasks", "author", "--teacher", "gpt@nowhere", "--out", join(scratchDir(), "x.jsonl")]);
  assert.equal(t.code, 2);
  assert.match(t.stderr, /openai:<model>@/);
  const h = await runCli(["tasks", "--help"]);
  assert.equal(h.code, 0);
  for (const c of ["verify", "author", "split", "stats", "export"]) assert.match(h.stdout, new RegExp(`\\b${c}\\b`));
});

test("a bad task file is reported with file and line", async () => {
  const file = join(scratchDir(), "bad.jsonl");
  writeFileSync(file, '{"db_id": "x", "db_path": "x.sqlite", "question": "q?", "gold_sql": "select 1"}\n{oops\n');
  const r = await runCli(["tasks", "stats", file]);
  assert.equal(r.code, 1);
  assert.ok(r.stderr.includes(`${file}:2`), r.stderr);
});
