import { test } from "node:test";
import assert from "node:assert/strict";
import Database from "better-sqlite3";
import { mkdirSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { ConnectionCache } from "../../lib/db/connection.js";
import { runQuery } from "../../lib/db/run.js";
import { fileSha256 } from "../../lib/db/copies.js";
import { scratchDir } from "../helpers.js";
import { makeFixtureDb } from "./fixture.js";

const dir = scratchDir("t2s-db-run-");
const db = makeFixtureDb(dir);
const cache = new ConnectionCache();
const limits = { maxRows: 200, maxResultBytes: 1_000_000 };
const run = (sql: string, l = limits) => runQuery(cache, db, sql, l);

test("values keep their storage classes; blobs become hex objects", () => {
  const r = run("SELECT id, name, price, data FROM items ORDER BY id");
  assert.ok(r.ok);
  assert.deepEqual(r.columns, ["id", "name", "price", "data"]);
  assert.deepEqual(r.rows, [
    [1, "apple", 1.5, { blob: "00ff10" }],
    [2, "pear", null, null],
    [3, "plum", 2, null],
  ]);
  assert.equal(r.truncated, false);
  assert.ok(r.elapsedMs >= 0);
});

test("maxRows caps the rows and reports truncation; an infinite CTE stops at the cap", () => {
  const r = run("SELECT tag FROM tags", { maxRows: 5, maxResultBytes: 1e6 });
  assert.ok(r.ok);
  assert.equal(r.rows.length, 5);
  assert.equal(r.truncated, true);
  const inf = run("WITH RECURSIVE n(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM n) SELECT x FROM n", { maxRows: 3, maxResultBytes: 1e6 });
  assert.ok(inf.ok);
  assert.deepEqual(inf.rows, [[1], [2], [3]]);
  assert.equal(inf.truncated, true);
  const exact = run("SELECT id FROM items", { maxRows: 3, maxResultBytes: 1e6 });
  assert.ok(exact.ok && !exact.truncated);
});

test("a result over the byte limit is too_large", () => {
  const r = run("SELECT printf('%.*c', 5000, 'x') FROM tags", { maxRows: 1000, maxResultBytes: 100_000 });
  assert.equal(r.ok, false);
  assert.equal(!r.ok && r.error.kind, "too_large");
});

test("errors are typed: syntax, runtime, too_large, unsafe", () => {
  const kind = (sql: string) => {
    const r = run(sql);
    return r.ok ? "ok" : r.error.kind;
  };
  assert.equal(kind("SELEC 1"), "syntax");
  assert.equal(kind("SELECT nope FROM items"), "syntax");
  assert.equal(kind("SELECT * FROM missing_table"), "syntax");
  assert.equal(kind("SELECT abs(-9223372036854775807 - 1)"), "runtime");
  assert.equal(kind("SELECT printf('%.*c', 2000000000, 'x')"), "too_large");
  assert.equal(kind("WITH a AS (SELECT 1) DELETE FROM items RETURNING *"), "unsafe");
  assert.equal(kind("WITH a AS (SELECT 1) INSERT INTO items(name) SELECT 'x' FROM a"), "unsafe");
});

test("missing, empty, non-file and non-SQLite paths are no_database", () => {
  const empty = join(dir, "empty.sqlite");
  writeFileSync(empty, "");
  const text = join(dir, "text.sqlite");
  writeFileSync(text, "this is not a database, just some text that is long enough to have a header".repeat(20));
  const folder = join(dir, "folder.sqlite");
  mkdirSync(folder);
  for (const p of [join(dir, "nope.sqlite"), empty, text, folder]) {
    const r = runQuery(cache, p, "SELECT 1", limits);
    assert.equal(!r.ok && r.error.kind, "no_database", p);
  }
});

test("a connection is reopened when its file is replaced", () => {
  const d2 = scratchDir("t2s-db-run2-");
  const path = makeFixtureDb(d2);
  const before = runQuery(cache, path, "SELECT count(*) AS n FROM items", limits);
  assert.ok(before.ok && before.rows[0][0] === 3);
  rmSync(path);
  const db2 = new Database(path);
  db2.exec("CREATE TABLE items (id INTEGER PRIMARY KEY); INSERT INTO items VALUES (1), (2), (3), (4), (5);");
  db2.close();
  const after = runQuery(cache, path, "SELECT count(*) AS n FROM items", limits);
  assert.ok(after.ok && after.rows[0][0] === 5);
  writeFileSync(path, "");
  const empty = runQuery(cache, path, "SELECT 1", limits);
  assert.equal(!empty.ok && empty.error.kind, "no_database");
});

test("nothing run here changes the database file", () => {
  const before = fileSha256(db);
  for (const sql of ["SELECT * FROM items", "DELETE FROM items", "PRAGMA user_version = 5", "SELECT 1; DROP TABLE items"]) run(sql);
  assert.equal(fileSha256(db), before);
});

test("views in an untrusted database cannot smuggle in denied functions", () => {
  const path = join(scratchDir("t2s-db-views-"), "views.sqlite");
  const d = new Database(path);
  d.exec(`CREATE TABLE t (a);
    CREATE VIEW v_opts AS SELECT sqlite_compileoption_get(0) AS x;
    CREATE VIEW v_ext AS SELECT load_extension('/tmp/evil') AS y;
    CREATE VIEW v_tok AS SELECT fts3_tokenizer('simple') AS z;
    CREATE VIEW v_ok AS SELECT upper('a') AS u;`);
  d.close();
  for (const v of ["v_opts", "v_ext", "v_tok"]) {
    const r = runQuery(cache, path, `SELECT * FROM ${v}`, limits);
    assert.equal(!r.ok && r.error.kind, "unsafe", v);
  }
  assert.deepEqual(runQuery(cache, path, "SELECT * FROM v_ok", limits).ok, true);
});
