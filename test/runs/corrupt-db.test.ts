import { test } from "node:test";
import assert from "node:assert/strict";
import { mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { runCli, scratchDir } from "../helpers.js";
import { spiderFolder } from "../tasks/fixtures.js";
import { describeMissing, loadTaskSource } from "../../lib/tasks/loaders.js";
import { isT2sError } from "../../lib/core/errors.js";

/** A Spider folder whose second database is a corrupt file (not SQLite), with one question on each. */
function folderWithCorruptDb(): string {
  const dir = spiderFolder([
    { db_id: "pets_1", question: "How many dogs are there?", query: "SELECT count(*) FROM pets WHERE kind = 'dog'" },
    { db_id: "broken_1", question: "How many rows?", query: "SELECT count(*) FROM t" },
    { db_id: "broken_1", question: "Any row?", query: "SELECT * FROM t LIMIT 1" },
  ]);
  const tables = JSON.parse(readFileSync(join(dir, "tables.json"), "utf8"));
  tables.push({ db_id: "broken_1", table_names: ["t"], column_names: [[-1, "*"], [0, "x"]] });
  writeFileSync(join(dir, "tables.json"), JSON.stringify(tables));
  mkdirSync(join(dir, "database", "broken_1"));
  writeFileSync(join(dir, "database", "broken_1", "broken_1.sqlite"), Buffer.alloc(8192, 0x5a));
  return dir;
}

test("a corrupt database is skipped and listed like a missing one, or is an error with strict", () => {
  const dir = folderWithCorruptDb();
  const loaded = loadTaskSource(dir);
  assert.deepEqual(loaded.tasks.map((t) => t.db_id), ["pets_1"]);
  assert.deepEqual(loaded.missing.map((m) => [m.db_id, m.tasks]), [["broken_1", 2]]);
  assert.match(describeMissing(loaded.missing), /skipped 2 tasks of 1 missing or unreadable database[\s\S]*broken_1: 2 tasks \(not a readable SQLite database: /);
  assert.throws(() => loadTaskSource(dir, { strict: true }), (e) => isT2sError(e, "no_database") && /broken_1.*not a readable SQLite database/.test(e.message));
});

test("t2s benchmark on a Spider folder with one corrupt database runs the others and lists it", async () => {
  const dir = folderWithCorruptDb();
  const script = join(dir, "script.jsonl");
  writeFileSync(script, JSON.stringify({ replies: ["```sql\nSELECT count(*) FROM pets WHERE kind = 'dog'\n```"] }) + "\n");
  const out = join(scratchDir(), "rows.jsonl");
  const r = await runCli(["benchmark", "--policy", `scripted:${script}`, "--tasks", dir, "--out", out, "--k", "2", "--workers", "1", "--json"]);
  assert.equal(r.code, 0, r.stderr);
  assert.match(r.stderr, /broken_1: 2 tasks \(not a readable SQLite database/);
  const rows = readFileSync(out, "utf8").trim().split("\n").map((l) => JSON.parse(l));
  assert.deepEqual([...new Set(rows.map((x) => x.db_id))], ["pets_1"]);
  assert.ok(rows.every((x) => x.correct));
});
