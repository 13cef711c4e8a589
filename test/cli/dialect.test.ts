import { test } from "node:test";
import assert from "node:assert/strict";
import { Command } from "commander";
import { mkdirSync, utimesSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { commandGroups, groupsFor } from "../../lib/cli/commands.js";
import { distIsFresh, sourceSignature } from "../../bin/dist-check.js";
import { runCli, scratchDir } from "../helpers.js";
import { spiderFolder } from "../tasks/fixtures.js";

test("each command group adds exactly the top-level commands it is listed under", async () => {
  const all = new Set<string>();
  for (const g of commandGroups) {
    const p = new Command();
    (await g.load())(p);
    assert.deepEqual(p.commands.map((c) => c.name()).sort(), [...g.names].sort());
    for (const n of g.names) all.add(n);
  }
  assert.deepEqual(groupsFor(["grade", "--jsonl"]).map((g) => g.names), [["grade"]]);
  assert.deepEqual(groupsFor(["--version"]), []);
  assert.equal(groupsFor(["--help"]).length, commandGroups.length);
  assert.equal(groupsFor(["no-such"]).length, commandGroups.length);
});

test("dist/ counts as fresh only while every lib/ source is as it was built", () => {
  const root = scratchDir("t2s-dist-");
  const lib = join(root, "lib");
  const dist = join(root, "dist");
  mkdirSync(join(lib, "db"), { recursive: true });
  mkdirSync(dist);
  writeFileSync(join(lib, "a.ts"), "export const a = 1;\n");
  writeFileSync(join(lib, "db", "b.ts"), "export const b = 1;\n");
  assert.equal(distIsFresh(lib, dist), false, "never built");
  writeFileSync(join(dist, ".sources"), sourceSignature(lib));
  assert.equal(distIsFresh(lib, dist), true);
  const later = new Date(Date.now() + 5000);
  utimesSync(join(lib, "db", "b.ts"), later, later);
  assert.equal(distIsFresh(lib, dist), false, "an edited source");
  writeFileSync(join(dist, ".sources"), sourceSignature(lib));
  writeFileSync(join(lib, "c.ts"), "export const c = 1;\n");
  assert.equal(distIsFresh(lib, dist), false, "an added source");
});

test("benchmark takes a Spider folder; a folder that is no task source is one clear error", async () => {
  const dir = spiderFolder([{ db_id: "pets_1", question: "How many pets?", query: 'SELECT count(*) FROM pets WHERE kind = "dog" OR kind ! = "dog"' }]);
  const script = join(scratchDir("t2s-bench-script-"), "s.jsonl");
  writeFileSync(script, JSON.stringify({ replies: ["```sql\nSELECT count(*) FROM pets\n```"] }) + "\n");
  const out = join(scratchDir("t2s-bench-out-"), "rows.jsonl");
  const r = await runCli(["benchmark", "--policy", `scripted:${script}`, "--tasks", dir, "--out", out, "--k", "1", "--quiet", "--json", "--max-rows", "1000"]);
  assert.equal(r.code, 0, r.stderr);
  assert.equal(JSON.parse(r.stdout).summary.pass1, 1);
  const bad = await runCli(["benchmark", "--policy", `scripted:${script}`, "--tasks", scratchDir("t2s-empty-"), "--out", join(scratchDir(), "r.jsonl")]);
  assert.equal(bad.code, 1);
  assert.match(bad.stderr, /^error \[unknown_format\]/);
  assert.doesNotMatch(bad.stderr, /EISDIR|at .*\.ts:\d+/);
});

test("verify lists the tasks of missing databases; --strict makes them an error; bad flags exit 2", async () => {
  const dir = spiderFolder([
    { db_id: "pets_1", question: "Dogs?", query: 'SELECT count(*) FROM pets WHERE kind = "dog"' },
    { db_id: "ghost_1", question: "Ghosts?", query: "SELECT 1" },
  ]);
  writeFileSync(join(dir, "tables.json"), JSON.stringify([{ db_id: "pets_1" }, { db_id: "ghost_1" }]));
  const r = await runCli(["tasks", "verify", dir, "--mode", "eval"]);
  assert.equal(r.code, 0, r.stderr);
  assert.match(r.stdout, /kept 1 of 1/);
  assert.match(r.stderr, /skipped 1 task of 1 missing database[\s\S]*ghost_1: 1 task/);
  const strict = await runCli(["tasks", "verify", dir, "--strict"]);
  assert.equal(strict.code, 1);
  assert.match(strict.stderr, /error \[no_database\].*ghost_1/);
  assert.equal((await runCli(["tasks", "verify", dir, "--mode", "exam"])).code, 2);
  assert.equal((await runCli(["grade", "--jsonl", "--dialect", "mysql"], { input: "" })).code, 2);
  assert.equal((await runCli(["grade", "--jsonl", "--distinct", "drop"], { input: "" })).code, 2);
});
