import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import Database from "better-sqlite3";
import { join } from "node:path";
import { ExecutorPool } from "../../lib/db/pool.js";
import type { ExecOptions, ExecOutcome, Executor } from "../../lib/db/types.js";
import { isT2sError } from "../../lib/core/errors.js";
import { grade, type GradableTask } from "../../lib/verifier/grade.js";
import { GoldCache } from "../../lib/verifier/goldcache.js";
import { scratchDir } from "../helpers.js";

let pool: ExecutorPool;
let dir: string;
let dbPath: string;

/** Counts the statements it is asked to run, per SQL text. */
class CountingExecutor implements Executor {
  readonly counts = new Map<string, number>();
  constructor(private readonly inner: Executor) {}
  execute(db: string, sql: string, o?: ExecOptions): Promise<ExecOutcome> {
    this.counts.set(sql, (this.counts.get(sql) ?? 0) + 1);
    return this.inner.execute(db, sql, o);
  }
  async close(): Promise<void> {}
}

before(() => {
  dir = scratchDir("t2s-grade-");
  dbPath = join(dir, "people.sqlite");
  const db = new Database(dbPath);
  db.exec(`CREATE TABLE team (team_id INTEGER PRIMARY KEY, title TEXT NOT NULL);
           CREATE TABLE person (person_id INTEGER PRIMARY KEY, name TEXT NOT NULL, score REAL NOT NULL, city TEXT,
                                team_id INTEGER NOT NULL REFERENCES team(team_id));`);
  const teams = ["Red", "Blue", "Green"];
  teams.forEach((t, i) => db.prepare("INSERT INTO team VALUES (?, ?)").run(i + 1, t));
  for (let i = 1; i <= 40; i++) {
    db.prepare("INSERT INTO person VALUES (?, ?, ?, ?, ?)").run(i, `P${String(i).padStart(2, "0")}`, (i * 37) % 101 + 0.5, i % 4 === 0 ? null : `C${i % 5}`, (i % 3) + 1);
  }
  db.close();
  pool = new ExecutorPool({ workers: 2 });
});

after(async () => {
  await pool.close();
});

const task = (gold_sql: string, extra: Partial<GradableTask> = {}): GradableTask => ({ db_path: dbPath, gold_sql, ...extra });

test("a correct query in another column order is correct; raw SQL mode skips extraction", async () => {
  const t = task("SELECT name, score FROM person WHERE score > 90");
  const r = await grade(t, "```sql\nSELECT score, name FROM person WHERE score >= 90.5;\n```", { executor: pool });
  assert.equal(r.outcome, "correct", r.reason);
  assert.equal(r.correct, true);
  assert.equal(r.executes, true);
  assert.equal(r.reward, 1);
  assert.equal(r.sql, "SELECT score, name FROM person WHERE score >= 90.5");
  const raw = await grade(t, "SELECT score, name FROM person WHERE score > 90;", { executor: pool, isReply: false, preset: "binary" });
  assert.equal(raw.outcome, "correct");
});

test("wrong rows, sql errors, unsafe queries and missing SQL get their outcomes and rewards", async () => {
  const t = task("SELECT COUNT(*) FROM person WHERE city IS NULL");
  const wrong = await grade(t, "SELECT COUNT(*) FROM person", { executor: pool });
  assert.deepEqual([wrong.outcome, wrong.correct, wrong.executes, wrong.reward], ["wrong_rows", false, true, 0.1]);
  assert.match(wrong.reason, /^result differs: got 1 row x 1 col, want 1 row x 1 col/);
  const err = await grade(t, "<solution>SELECT nope FROM person</solution>", { executor: pool, preset: "tool-rl" });
  assert.deepEqual([err.outcome, err.executes, err.reward], ["sql_error", false, 0]);
  assert.match(err.reason, /^sql error: .*nope/);
  const unsafe = await grade(t, "<solution>DELETE FROM person</solution>", { executor: pool, preset: "tool-rl" });
  assert.deepEqual([unsafe.outcome, unsafe.reward], ["unsafe", -1]);
  const none = await grade(t, "I am not sure how to answer.", { executor: pool, preset: "tool-rl", invalidToolCalls: 2 });
  assert.deepEqual([none.outcome, none.sql, none.reward], ["no_sql", null, -1.1]);
  const cut = await grade(t, "```sql\nSELECT COUNT(*) FROM person WHERE city IS NULL\n```", { executor: pool, finishReason: "length", preset: "tool-rl" });
  assert.deepEqual([cut.outcome, cut.correct, cut.reward], ["truncated", false, -1]);
});

test("a candidate over the row cap is too_large; a gold over it is a task error", async () => {
  const r = await grade(task("SELECT name FROM person WHERE person_id <= 3"), "SELECT name FROM person", { executor: pool, maxRows: 5 });
  assert.equal(r.outcome, "too_large");
  assert.equal(r.executes, true);
  await assert.rejects(grade(task("SELECT name FROM person"), "SELECT 1", { executor: pool, maxRows: 5 }), (e) => isT2sError(e, "gold_failed"));
});

test("a runaway query times out", async () => {
  const r = await grade(task("SELECT 1"), "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) SELECT max(x) FROM c", { executor: pool, timeoutMs: 300 });
  assert.equal(r.outcome, "timeout");
});

test("the gold runs once per database and gold text, also under concurrent grades", async () => {
  const counting = new CountingExecutor(pool);
  const cache = new GoldCache();
  const gold = "SELECT title, COUNT(*) FROM person JOIN team USING (team_id) GROUP BY title";
  const replies = ["SELECT 1", "SELECT title, COUNT(*) FROM team JOIN person USING (team_id) GROUP BY 1", "SELECT 2", "SELECT 3"];
  const results = await Promise.all(replies.map((r) => grade(task(gold), r, { executor: counting, goldCache: cache, isReply: false })));
  assert.deepEqual(results.map((r) => r.correct), [false, true, false, false]);
  await grade(task(gold), "SELECT 4", { executor: counting, goldCache: cache });
  assert.equal(counting.counts.get(gold), 1);
  assert.equal(cache.hits, 4);
  const uncached = new CountingExecutor(pool);
  await grade(task(gold), "SELECT 4", { executor: uncached, goldCache: false });
  await grade(task(gold), "SELECT 4", { executor: uncached, goldCache: false });
  assert.equal(uncached.counts.get(gold), 2);
});

test("a failing gold throws a typed task error, is cached, and never scores the candidate", async () => {
  const counting = new CountingExecutor(pool);
  const cache = new GoldCache();
  const bad = task("SELECT missing FROM person", { id: "t-bad" });
  for (let i = 0; i < 2; i++) {
    await assert.rejects(grade(bad, "SELECT 1", { executor: counting, goldCache: cache }), (e) => isT2sError(e, "gold_failed") && /t-bad/.test((e as Error).message));
  }
  assert.equal(counting.counts.get("SELECT missing FROM person"), 1);
  assert.equal(counting.counts.get("SELECT 1"), undefined);
  await assert.rejects(grade(task("SELECT 1", { db_path: join(dir, "nope.sqlite") }), "SELECT 1", { executor: pool }), (e) => isT2sError(e, "no_database"));
});

test("order: the task's grading overrides the default, explicit options override the task", async () => {
  const gold = "SELECT name FROM person WHERE person_id <= 3 ORDER BY name DESC";
  const reversed = "SELECT name FROM person WHERE person_id <= 3 ORDER BY name";
  assert.equal((await grade(task(gold), reversed, { executor: pool })).outcome, "wrong_rows");
  assert.equal((await grade(task(gold, { grading: { order: "ignore" } }), reversed, { executor: pool })).outcome, "correct");
  assert.equal((await grade(task(gold, { grading: { order: "ignore" } }), reversed, { executor: pool, compare: { order: "always" } })).outcome, "wrong_rows");
});

test("neighbor databases catch a hard-coded answer that matches by accident", async () => {
  const gold = "SELECT name FROM person ORDER BY score DESC, person_id LIMIT 1";
  const top = await pool.execute(dbPath, gold);
  assert.ok(top.ok);
  const hardCoded = `SELECT '${top.rows[0][0]}'`;
  const neighborDir = join(dir, "neighbors");
  assert.equal((await grade(task(gold), hardCoded, { executor: pool, isReply: false })).outcome, "correct");
  const r = await grade(task(gold), hardCoded, { executor: pool, isReply: false, neighbors: 3, neighborDir });
  assert.equal(r.outcome, "wrong_rows");
  assert.match(r.reason, /neighbor database/);
  const real = await grade(task(gold), "SELECT name FROM person ORDER BY score DESC, person_id ASC LIMIT 1", { executor: pool, isReply: false, neighbors: 3, neighborDir });
  assert.equal(real.outcome, "correct", real.reason);
  const join2 = await grade(task("SELECT title, COUNT(*) FROM person JOIN team USING (team_id) GROUP BY title"),
    "SELECT t.title, (SELECT COUNT(*) FROM person p WHERE p.team_id = t.team_id) FROM team t", { executor: pool, isReply: false, neighbors: 3, neighborDir });
  assert.equal(join2.outcome, "correct", join2.reason);
});

test("evidence penalty applies only with the option and a task that has evidence", async () => {
  const t = task("SELECT COUNT(*) FROM person", { evidence: "people refers to person; count rows" });
  const reply = "```sql\nSELECT COUNT(*) FROM person\n```";
  assert.equal((await grade(t, reply, { executor: pool, preset: "tool-rl" })).reward, 1);
  assert.equal((await grade(t, reply, { executor: pool, preset: "tool-rl", evidencePenalty: true })).reward, 0.9);
  const turns = ["Requirement of external knowledge 1 (people refers to person)", "Verification of external knowledge 1: ok\n" + reply];
  assert.equal((await grade(t, turns[1], { executor: pool, preset: "tool-rl", evidencePenalty: true, assistantTurns: turns })).reward, 1);
  assert.equal((await grade(t, turns[1], { executor: pool, preset: "tool-rl", evidencePenalty: true, assistantTurns: ["x", "y", turns[1]] })).reward, 0.9);
  const plain = task("SELECT COUNT(*) FROM person");
  assert.equal((await grade(plain, reply, { executor: pool, preset: "tool-rl", evidencePenalty: true })).reward, 1);
});

test("one rule for fenced and bare replies: SELECT 1; DELETE ... is unsafe either way", async () => {
  const t = task("SELECT 1");
  const bare = await grade(t, "SELECT 1; DELETE FROM person", { executor: pool });
  const fenced = await grade(t, "```sql\nSELECT 1; DELETE FROM person\n```", { executor: pool });
  assert.equal(fenced.outcome, "unsafe", fenced.reason);
  assert.deepEqual([bare.outcome, bare.reward, bare.sql], [fenced.outcome, fenced.reward, fenced.sql]);
});
