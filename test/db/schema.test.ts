import { test } from "node:test";
import assert from "node:assert/strict";
import Database from "better-sqlite3";
import { join } from "node:path";
import { schemaDdl, splitCreateTable } from "../../lib/db/schema.js";
import { defaultShopPath } from "../../lib/db/shop/build.js";
import { isT2sError } from "../../lib/core/errors.js";
import { scratchDir } from "../helpers.js";
import { makeFixtureDb } from "./fixture.js";

test("the shop DDL keeps every column comment, key and reference", () => {
  const ddl = schemaDdl(defaultShopPath());
  assert.match(ddl, /CREATE TABLE orders \(\n  order_id INTEGER PRIMARY KEY,\n/);
  assert.match(ddl, /discount_pct REAL -- percent off the items subtotal, e\.g\. 10 for 10%; NULL means no discount\n\);/);
  assert.match(ddl, /sales_rep_id INTEGER REFERENCES employees\(employee_id\), -- NULL when the order was placed online without a rep/);
  assert.match(ddl, /rating INTEGER NOT NULL CHECK \(rating BETWEEN 1 AND 5\),/);
  assert.equal((ddl.match(/CREATE TABLE/g) ?? []).length, 8);
  // the DDL is itself valid SQL that recreates the same columns
  const db = new Database(":memory:");
  db.exec(ddl);
  const cols = db.prepare("SELECT count(*) AS n FROM pragma_table_info('orders')").get() as { n: number };
  assert.equal(cols.n, 9);
  db.close();
});

test("sample values are added per column, never for the integer primary key", () => {
  const ddl = schemaDdl(defaultShopPath(), { sampleValues: 2, tables: ["payments"] });
  assert.equal((ddl.match(/CREATE TABLE/g) ?? []).length, 1);
  assert.match(ddl, /method TEXT NOT NULL, -- 'card', 'paypal', 'bank_transfer' or 'gift_card'; samples: '[a-z_]+', '[a-z_]+'/);
  assert.doesNotMatch(ddl, /payment_id INTEGER PRIMARY KEY,? --/);
});

test("comments on their own line go with the next column; tables without comments still print", () => {
  const split = splitCreateTable("CREATE TABLE t (\n  -- the key\n  a INTEGER,\n  b TEXT, -- b's note\n  c TEXT /* c note */\n)");
  assert.deepEqual(split?.defs.map((d) => [d.text, d.comments]), [["a INTEGER", ["the key"]], ["b TEXT", ["b's note"]], ["c TEXT", ["c note"]]]);
  const ddl = schemaDdl(makeFixtureDb(), { sampleValues: 2 });
  assert.match(ddl, /name TEXT NOT NULL, -- what the item is called; samples: 'apple', 'pear'/);
  assert.match(ddl, /data BLOB -- samples: <blob>/);
  assert.match(ddl, /CREATE TABLE tags \(item_id INTEGER REFERENCES items\(id\), tag TEXT\)|CREATE TABLE tags \(\n  item_id INTEGER REFERENCES items\(id\), -- samples: 1, 2\n  tag TEXT -- samples: 't0', 't1'\n\);/);
});

test("a missing database is a no_database error", () => {
  assert.throws(() => schemaDdl(join(scratchDir(), "missing.sqlite")), (e) => isT2sError(e, "no_database"));
});
