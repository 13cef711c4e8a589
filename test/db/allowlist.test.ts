import { test } from "node:test";
import assert from "node:assert/strict";
import { checkSqlText, MAX_SQL_LENGTH } from "../../lib/db/allowlist.js";

test("plain queries pass the text check", () => {
  for (const sql of ["SELECT 1", "  with a as (select 1) select * from a", "VALUES (1, 2)", "select 1;", "select 1; -- done", "/* lead */ select 'drop table x; delete'"]) {
    assert.equal(checkSqlText(sql), null, sql);
  }
});

test("statement classes other than queries are unsafe, named in the message", () => {
  const cases: [string, RegExp][] = [
    ["INSERT INTO t VALUES (1)", /INSERT/],
    ["update t set a = 1", /UPDATE/],
    ["delete from t", /DELETE/],
    ["REPLACE INTO t VALUES (1)", /REPLACE/],
    ["create temp table x(a)", /CREATE/],
    ["drop table t", /DROP/],
    ["alter table t add column b", /ALTER/],
    ["attach 'x.db' as y", /ATTACH/],
    ["detach y", /DETACH/],
    ["pragma writable_schema = 1", /PRAGMA/],
    ["vacuum into '/tmp/x'", /VACUUM/],
    ["reindex", /REINDEX/],
    ["analyze", /ANALYZE/],
    ["begin immediate", /BEGIN/],
    ["commit", /COMMIT/],
    ["savepoint s", /SAVEPOINT/],
    ["release s", /RELEASE/],
    ["rollback", /ROLLBACK/],
    ["explain select 1", /EXPLAIN/],
    ["-- hi\n/* x */ DELETE FROM t", /DELETE/],
  ];
  for (const [sql, re] of cases) {
    const e = checkSqlText(sql);
    assert.equal(e?.kind, "unsafe", sql);
    assert.match(e!.message, re, sql);
  }
});

test("a second statement is unsafe even when hidden after a comment", () => {
  for (const sql of ["select 1; select 2", "select 1 -- x\n; delete from t", "select 1; /* */ drop table t"]) {
    assert.equal(checkSqlText(sql)?.kind, "unsafe", sql);
  }
});

test("denied functions and tables are unsafe, quoted or not; strings mentioning them are fine", () => {
  for (const sql of ["select load_extension('x')", 'select "load_extension"(\'x\')', "select fts3_tokenizer('simple')", "select * from dbstat", "select * from pragma_database_list", "select writefile('/tmp/x', 'y')", "SELECT * FROM [sqlite_dbpage]"]) {
    assert.equal(checkSqlText(sql)?.kind, "unsafe", sql);
  }
  assert.equal(checkSqlText("select 'load_extension(x)' as s"), null);
  assert.equal(checkSqlText("select edit, eval from changes"), null);
  assert.equal(checkSqlText("select load_extension /* gap */ ('x')")?.kind, "unsafe");
  assert.equal(checkSqlText("select * from pragma_table_info('t')"), null);
});

test("NUL bytes, empty text and oversized text are refused", () => {
  assert.equal(checkSqlText("select 1\u0000; delete from t")?.kind, "unsafe");
  assert.equal(checkSqlText("  -- nothing\n")?.kind, "syntax");
  assert.equal(checkSqlText("x".repeat(MAX_SQL_LENGTH + 1))?.kind, "too_large");
  assert.equal(checkSqlText(42 as unknown as string)?.kind, "syntax");
});
