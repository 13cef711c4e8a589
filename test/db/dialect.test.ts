import { test } from "node:test";
import assert from "node:assert/strict";
import Database from "better-sqlite3";
import { join } from "node:path";
import { doubleQuotedToString, normalizeForDialect, unresolvedDoubleQuoted } from "../../lib/db/dialect.js";
import { jsonWithIntegers } from "../../lib/db/format.js";
import { ExecutorPool } from "../../lib/db/pool.js";
import { DirectExecutor } from "../../lib/db/direct-executor.js";
import { scratchDir } from "../helpers.js";
import { makeFixtureDb } from "./fixture.js";

const db = makeFixtureDb();

test("the spider dialect reads unresolved double-quoted names as strings, as SQLite's legacy mode does", async () => {
  const ex = new DirectExecutor();
  try {
    const sql = 'SELECT id FROM items WHERE name = "pear"';
    const plain = await ex.execute(db, sql);
    assert.equal(plain.ok, false, "the kit's SQLite is built without double-quoted strings");
    assert.match(!plain.ok ? plain.error.message : "", /should this be a string literal/);
    assert.deepEqual(await rows(ex, sql), [[2]]);
    // a double-quoted name that is a column stays a column; the string beside it becomes a string
    assert.deepEqual(await rows(ex, 'SELECT "name" FROM items WHERE "name" LIKE "p%" AND "id" > 1 ORDER BY "id"'), [["pear"], ["plum"]]);
    // several literals, one with a quote inside, and an alias written in double quotes
    assert.deepEqual(await rows(ex, `SELECT count(*) AS "n" FROM items WHERE name IN ("apple", "it's", "plum") ORDER BY "n"`), [[2]]);
    // the evaluator's normalisations
    assert.deepEqual(await rows(ex, "SELECT count(*) FROM items WHERE id ! = 1 AND id > = 2 AND id < = 3"), [[2]]);
    const bad = await ex.execute(db, 'SELECT nope FROM items WHERE name = "pear"', { dialect: "spider" });
    assert.equal(!bad.ok && bad.error.kind, "syntax");
    assert.match(!bad.ok ? bad.error.message : "", /no such column: nope/);
  } finally {
    await ex.close();
  }
});

async function rows(ex: DirectExecutor, sql: string) {
  const r = await ex.execute(db, sql, { dialect: "spider" });
  assert.ok(r.ok, `${sql}: ${JSON.stringify(r)}`);
  return r.ok ? r.rows : [];
}

test("the dialect travels to the pool's workers", async () => {
  const pool = new ExecutorPool({ workers: 1, spareWorkers: 0 });
  try {
    const r = await pool.execute(db, 'SELECT price FROM items WHERE name = "apple"', { dialect: "spider" });
    assert.deepEqual(r.ok && r.rows, [[1.5]]);
    const plain = await pool.execute(db, 'SELECT price FROM items WHERE name = "apple"');
    assert.equal(plain.ok, false);
  } finally {
    await pool.close();
  }
});

test("dialect helpers: the DQS hint, token rewrites outside strings and comments", () => {
  assert.equal(unresolvedDoubleQuoted('no such column: "JetBlue Airways" - should this be a string literal in single-quotes?'), "JetBlue Airways");
  assert.equal(unresolvedDoubleQuoted("no such column: x"), null);
  assert.equal(doubleQuotedToString(`SELECT 'a "b"' -- "b"\nFROM t WHERE x = "b" OR y = "o'k"`, "b"), `SELECT 'a "b"' -- "b"\nFROM t WHERE x = 'b' OR y = "o'k"`);
  assert.equal(doubleQuotedToString(`SELECT 1 WHERE y = "o'k"`, "o'k"), `SELECT 1 WHERE y = 'o''k'`);
  assert.equal(doubleQuotedToString("SELECT [b], `b` FROM t", "b"), null, "only double quotes are strings in legacy SQLite");
  assert.equal(normalizeForDialect("a ! = b", "sqlite"), "a ! = b");
  assert.equal(normalizeForDialect("a ! = b", "spider"), "a != b");
});

test("integers beyond 2^53 stay exact and distinct, and print as exact JSON numbers", async () => {
  const path = join(scratchDir("t2s-big-"), "big.sqlite");
  const d = new Database(path);
  d.exec("CREATE TABLE t (v INTEGER); INSERT INTO t VALUES (9007199254740992), (9007199254740993), (-9007199254740993), (42)");
  d.close();
  const ex = new DirectExecutor();
  try {
    const r = await ex.execute(path, "SELECT v FROM t");
    assert.deepEqual(r.ok && r.rows, [[9007199254740992n], [9007199254740993n], [-9007199254740993n], [42]]);
    assert.equal(jsonWithIntegers({ rows: r.ok ? r.rows : [] }), '{"rows":[[9007199254740992],[9007199254740993],[-9007199254740993],[42]]}');
  } finally {
    await ex.close();
  }
});

test("a view that calls a denied function is still refused (the bytecode check stays on for such schemas)", async () => {
  const path = join(scratchDir("t2s-view-"), "v.sqlite");
  const d = new Database(path);
  d.exec("CREATE TABLE t (v INTEGER); INSERT INTO t VALUES (1); CREATE VIEW sneaky AS SELECT sqlite_compileoption_used('x') AS u FROM t");
  d.close();
  const ex = new DirectExecutor();
  try {
    const r = await ex.execute(path, "SELECT * FROM sneaky");
    assert.equal(r.ok, false);
    assert.equal(!r.ok && r.error.kind, "unsafe");
  } finally {
    await ex.close();
  }
});
