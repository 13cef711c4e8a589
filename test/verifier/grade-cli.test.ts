import { before, test } from "node:test";
import assert from "node:assert/strict";
import Database from "better-sqlite3";
import { join } from "node:path";
import { runCli, scratchDir } from "../helpers.js";
import { parseGradeRequest, REQUEST_DEFAULTS } from "../../lib/verifier/request.js";

let db: string;

before(() => {
  db = join(scratchDir("t2s-grade-cli-"), "t.sqlite");
  const d = new Database(db);
  d.exec("CREATE TABLE t (id INTEGER PRIMARY KEY, name TEXT, v REAL); INSERT INTO t VALUES (1, 'a', 1.5), (2, 'b', 2.5), (3, 'c', 2.5);");
  d.close();
});

test("request lines: defaults fill missing fields; bad fields are named", () => {
  const r = parseGradeRequest('{"db": "x.sqlite", "gold": "SELECT 1", "pred": "SELECT 1"}');
  assert.deepEqual(r, { ...REQUEST_DEFAULTS, db: "x.sqlite", gold: "SELECT 1", pred: "SELECT 1", finishReason: undefined, invalidToolCalls: 0, dbId: undefined });
  const full = parseGradeRequest('{"db": "x", "gold": "g", "pred": "", "reply": false, "preset": "tool-rl", "order": "anywhere", "round": null, "neighbors": 2}');
  assert.ok(!("error" in full));
  assert.deepEqual([full.reply, full.preset, full.order, full.round, full.neighbors], [false, "tool-rl", "anywhere", null, 2]);
  assert.match((parseGradeRequest("{") as { error: string }).error, /not valid JSON/);
  assert.match((parseGradeRequest("[1]") as { error: string }).error, /JSON object/);
  assert.match((parseGradeRequest('{"gold": "g", "pred": "p"}') as { error: string }).error, /"db" must be a string \(it is missing\)/);
  assert.match((parseGradeRequest('{"db": "x", "gold": "g", "pred": "p", "preset": "dense"}') as { error: string }).error, /"preset"/);
  assert.match((parseGradeRequest('{"db": "x", "gold": "g", "pred": "p", "round": 1.5}') as { error: string }).error, /"round"/);
  assert.match((parseGradeRequest('{"db": "x", "gold": "g", "pred": "p", "neighbors": -1}') as { error: string }).error, /"neighbors"/);
  assert.match((parseGradeRequest('{"db": "x", "gold": "g", "pred": "p", "reply": "yes"}') as { error: string }).error, /"reply"/);
});

test("t2s grade --jsonl answers every line in order; a malformed line gets an error line only", async () => {
  const lines = [
    { db, gold: "SELECT name, v FROM t", pred: "Here:\n```sql\nSELECT v, name FROM t;\n```" },
    "this is not json",
    { db, gold: "SELECT name FROM t ORDER BY v DESC, id", pred: "SELECT name FROM t ORDER BY v", reply: false, preset: "binary" },
    { db, gold: "SELECT name FROM t ORDER BY v DESC, id", pred: "nothing here", preset: "tool-rl" },
    { db, gold: "SELECT missing FROM t", pred: "SELECT 1" },
    { db, gold: "SELECT COUNT(*) FROM t", pred: "SELECT COUNT(*) FROM t", reply: false, neighbors: 1 },
    "",
    { db, gold: "SELECT COUNT(*) FROM t", pred: "SELECT COUNT(*) FROM t", reply: false },
  ];
  const input = lines.map((l) => (typeof l === "string" ? l : JSON.stringify(l))).join("\n") + "\n";
  const r = await runCli(["grade", "--jsonl", "--workers", "1"], { input, env: { T2S_CACHE_DIR: scratchDir("t2s-cache-") } });
  assert.equal(r.code, 0, r.stderr);
  const out = r.stdout.trim().split("\n").map((l) => JSON.parse(l));
  assert.equal(out.length, 8, "one output line per input line, so they align");
  assert.deepEqual(out[0], { correct: true, executes: true, outcome: "correct", reason: "result matches (3 rows x 2 cols)", reward: 1 });
  assert.deepEqual(Object.keys(out[1]), ["error"]);
  assert.match(out[1].error, /^line 2: not valid JSON/);
  assert.deepEqual([out[2].outcome, out[2].reward], ["wrong_rows", 0]);
  assert.deepEqual([out[3].outcome, out[3].executes, out[3].reward], ["no_sql", false, -1]);
  assert.match(out[4].error, /gold_failed/);
  assert.equal(out[5].outcome, "correct");
  assert.match(out[6].error, /^line 7: blank line/);
  assert.equal(out[7].outcome, "correct");
});

test("t2s grade single mode prints JSON; bad flags exit 2", async () => {
  const r = await runCli(["grade", "--db", db, "--gold", "SELECT 'A'", "--pred", "SELECT 'a '", "--raw", "--json"]);
  assert.equal(r.code, 0, r.stderr);
  assert.deepEqual(JSON.parse(r.stdout), { correct: true, executes: true, outcome: "correct", reason: "result matches (1 row x 1 col)", reward: 1, sql: "SELECT 'a '" });
  assert.equal((await runCli(["grade", "--db", db, "--gold", "SELECT 1"])).code, 2);
  assert.equal((await runCli(["grade", "--jsonl", "--round", "x"])).code, 2);
});

test("t2s grade --jsonl refuses a line with an unknown field instead of grading it by the defaults", async () => {
  const lines = [
    { db, gold: "SELECT 1", pred: "SELECT 1", reply: false, dialct: "spider" },
    { db, gold: "SELECT 1", pred: "SELECT 1", reply: false },
  ];
  const r = await runCli(["grade", "--jsonl", "--workers", "1"], { input: lines.map((l) => JSON.stringify(l)).join("\n") + "\n", env: { T2S_CACHE_DIR: scratchDir("t2s-cache-") } });
  assert.equal(r.code, 0, r.stderr);
  const out = r.stdout.trim().split("\n").map((l) => JSON.parse(l));
  assert.match(out[0].error, /^line 1: unknown field "dialct" \(known: db, gold, pred/);
  assert.equal(out[1].outcome, "correct");
});
