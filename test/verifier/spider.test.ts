import { test } from "node:test";
import assert from "node:assert/strict";
import Database from "better-sqlite3";
import { copyFileSync, mkdirSync } from "node:fs";
import { join } from "node:path";
import { DirectExecutor } from "../../lib/db/direct-executor.js";
import { compareResults } from "../../lib/verifier/compare.js";
import { grade, type GradableTask } from "../../lib/verifier/grade.js";
import { removeDistinct } from "../../lib/verifier/clauses.js";
import { DEFAULT_VALUE_RULES, trimWhiteSpace, valueKey } from "../../lib/verifier/values.js";
import type { ExecSuccess, SqlValue } from "../../lib/db/types.js";
import { scratchDir } from "../helpers.js";

function makeDb(path: string, extra = ""): string {
  const d = new Database(path);
  d.exec(`CREATE TABLE people (id INTEGER PRIMARY KEY, name TEXT, city TEXT, score REAL);
          INSERT INTO people VALUES (1, 'Ann', 'Oslo', 1.0), (2, 'Bob', 'Oslo', 2.5), (3, 'Cy', 'Rome', 2.5), (4, 'Di', 'Rome', 2.504);${extra}`);
  d.close();
  return path;
}

const dir = scratchDir("t2s-spider-grade-");
const db = makeDb(join(dir, "people.sqlite"));
const ex = new DirectExecutor();
const task = (gold_sql: string): GradableTask => ({ db_path: db, gold_sql, db_id: "people" });
const verdict = async (gold: string, pred: string, opts: Parameters<typeof grade>[2] extends infer O ? Partial<O> : never = {}) =>
  (await grade(task(gold), pred, { executor: ex, isReply: false, goldCache: false, ...opts })).outcome;

test("the spider dialect grades as the official evaluator: exact values, order anywhere, ties in gold order", async () => {
  const spider = { dialect: "spider" as const };
  // double-quoted strings in gold and prediction
  assert.equal(await verdict('SELECT name FROM people WHERE city = "Oslo"', "SELECT name FROM people WHERE city = 'Oslo'", spider), "correct");
  // text is compared exactly (the kit's own rules fold case)
  assert.equal(await verdict("SELECT name FROM people WHERE id = 1", "SELECT upper(name) FROM people WHERE id = 1"), "correct");
  assert.equal(await verdict("SELECT name FROM people WHERE id = 1", "SELECT upper(name) FROM people WHERE id = 1", spider), "wrong_rows");
  // numbers exactly (no rounding to 2 decimals), but 1 = 1.0 as in Python
  assert.equal(await verdict("SELECT score FROM people WHERE id = 3", "SELECT score FROM people WHERE id = 4"), "correct");
  assert.equal(await verdict("SELECT score FROM people WHERE id = 3", "SELECT score FROM people WHERE id = 4", spider), "wrong_rows");
  assert.equal(await verdict("SELECT score FROM people WHERE id = 1", "SELECT 1", spider), "correct");
  // ORDER BY inside a subquery makes order matter for Spider, not for the kit's top-level rule
  const gold = "SELECT name FROM (SELECT name FROM people ORDER BY id DESC)";
  assert.equal(await verdict(gold, "SELECT name FROM people ORDER BY id"), "correct");
  assert.equal(await verdict(gold, "SELECT name FROM people ORDER BY id", spider), "wrong_rows");
  // rows tied on the ORDER BY key: the kit accepts any order among them, the official tool the gold's only
  const tied = "SELECT name, city FROM people ORDER BY city";
  assert.equal(await verdict(tied, "SELECT name, city FROM people ORDER BY city, id DESC"), "correct");
  assert.equal(await verdict(tied, "SELECT name, city FROM people ORDER BY city, id DESC", spider), "wrong_rows");
  // a gold over 200 rows is a task error in the kit's dialect, fine in Spider's (no row cap by default)
  assert.equal(await verdict("SELECT a.id FROM people a, people b, people c, people d", "SELECT a.id FROM people a, people b, people c, people d", spider), "correct");
  await assert.rejects(verdict("SELECT a.id FROM people a, people b, people c, people d", "SELECT 1"), /more than 200 rows/);
});

test("--distinct ignore removes DISTINCT from both queries, as Spider's default", async () => {
  assert.equal(removeDistinct("SELECT DISTINCT city, count(DISTINCT name) FROM t WHERE x = 'DISTINCT'"), "SELECT   city, count(  name) FROM t WHERE x = 'DISTINCT'");
  assert.equal(await verdict("SELECT DISTINCT city FROM people", "SELECT city FROM people", { dialect: "spider" }), "wrong_rows");
  assert.equal(await verdict("SELECT DISTINCT city FROM people", "SELECT city FROM people", { dialect: "spider", distinct: "ignore" }), "correct");
  assert.equal(await verdict("SELECT count(DISTINCT city) FROM people", "SELECT count(city) FROM people", { distinct: "ignore" }), "correct");
});

test("test-suite databases: a match must hold on every <suite dir>/<db_id>/*.sqlite", async () => {
  const suite = join(dir, "suite");
  mkdirSync(join(suite, "people"), { recursive: true });
  copyFileSync(db, join(suite, "people", "people.sqlite"));
  makeDb(join(suite, "people", "people_1.sqlite"), "INSERT INTO people VALUES (5, 'Ed', 'Oslo', 9.0);");
  // right on the original by accident (ids 1-2 happen to be the Oslo rows), wrong on the suite's second database
  const gold = "SELECT name FROM people WHERE city = 'Oslo'";
  const lucky = "SELECT name FROM people WHERE id <= 2";
  assert.equal(await verdict(gold, lucky), "correct");
  const r = await grade(task(gold), lucky, { executor: ex, isReply: false, goldCache: false, suiteDir: suite });
  assert.equal(r.outcome, "wrong_rows");
  assert.match(r.reason, /test-suite database 2 of 2/);
  const ok = await grade(task(gold), "SELECT name FROM people WHERE city LIKE 'Oslo'", { executor: ex, isReply: false, goldCache: false, suiteDir: suite });
  assert.equal(ok.outcome, "correct");
  assert.match(ok.reason, /also on 2 test-suite databases/);
  await assert.rejects(grade({ ...task(gold), db_id: "nobody" }, lucky, { executor: ex, isReply: false, suiteDir: suite }), /no test-suite databases for 'nobody'/);
});

const success = (rows: SqlValue[][]): ExecSuccess => ({ ok: true, columns: rows[0].map((_, i) => `c${i}`), rows, elapsedMs: 0, truncated: false });

test("integers beyond 2^53 compare exactly, also when sorted", () => {
  const a = success([[9007199254740993n], [9007199254740992n]]);
  const b = success([[9007199254740992n], [9007199254740992n]]);
  assert.equal(compareResults(a, b).match, false, "2^53 + 1 is not 2^53");
  assert.equal(compareResults(a, success([[9007199254740992n], [9007199254740993n]])).match, true);
  // the same value as an INTEGER bigint and as a REAL that holds it exactly are equal (Python: 2**53 == 2.0**53)
  assert.equal(valueKey(9007199254740992n, DEFAULT_VALUE_RULES), valueKey(2 ** 53, DEFAULT_VALUE_RULES));
  // ordered comparison with ties over mixed bigints and doubles does not throw
  const gold = success([[1, 9007199254740993n], [1, 5], [2, 0.5]]);
  assert.equal(compareResults(success([[1, 5], [1, 9007199254740993n], [2, 0.5]]), gold, { goldSql: "SELECT a, b FROM t ORDER BY 2 DESC" }).match, false);
  assert.equal(compareResults(success([[1, 9007199254740993n], [1, 5], [2, 0.5]]), gold, { goldSql: "SELECT a, b FROM t ORDER BY 2 DESC" }).match, true);
});

test("text is trimmed of Unicode White_Space exactly: U+0085 and U+3000 go, U+FEFF stays", () => {
  assert.equal(trimWhiteSpace("\u0085\u3000 a b\u2029\u00a0"), "a b");
  assert.equal(trimWhiteSpace("\ufeffa"), "\ufeffa");
  const key = (s: string) => valueKey(s, DEFAULT_VALUE_RULES);
  assert.equal(key("x\u0085"), key("x"));
  assert.notEqual(key("\ufeffx"), key("x"));
});
