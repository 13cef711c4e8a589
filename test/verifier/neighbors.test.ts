import { test } from "node:test";
import assert from "node:assert/strict";
import Database from "better-sqlite3";
import { readFileSync, statSync } from "node:fs";
import { join } from "node:path";
import { neighborDatabases } from "../../lib/verifier/neighbors.js";
import { scratchDir } from "../helpers.js";

function makeDb(path: string): void {
  const db = new Database(path);
  db.exec(`CREATE TABLE parent (parent_id INTEGER PRIMARY KEY, label TEXT NOT NULL UNIQUE, size INTEGER NOT NULL);
           CREATE TABLE child (child_id INTEGER PRIMARY KEY, parent_id INTEGER NOT NULL REFERENCES parent(parent_id), note TEXT, big INTEGER);
           CREATE TABLE loose (id INTEGER PRIMARY KEY, parent_id INTEGER, v REAL);`);
  for (let i = 1; i <= 30; i++) db.prepare("INSERT INTO parent VALUES (?, ?, ?)").run(i, `L${i}`, i * 10);
  for (let i = 1; i <= 60; i++) db.prepare("INSERT INTO child VALUES (?, ?, ?, ?)").run(i, (i % 12) + 1, i % 7 === 0 ? null : `n${i}`, BigInt("9007199254740993") + BigInt(i));
  for (let i = 1; i <= 10; i++) db.prepare("INSERT INTO loose VALUES (?, ?, ?)").run(i, 20 + i, i / 4);
  db.close();
}

test("neighbor copies are deterministic, cached, and keep keys valid", () => {
  const dir = scratchDir("t2s-nb-");
  const src = join(dir, "src.sqlite");
  makeDb(src);
  const a = neighborDatabases(src, 2, 7, join(dir, "a"));
  const b = neighborDatabases(src, 3, 7, join(dir, "b"));
  assert.equal(a.length, 2);
  assert.deepEqual(readFileSync(a[0]), readFileSync(b[0]), "same (db, seed, i) gives the same copy whatever K is");
  assert.deepEqual(readFileSync(a[1]), readFileSync(b[1]));
  assert.notDeepEqual(readFileSync(a[0]), readFileSync(a[1]));
  const other = neighborDatabases(src, 1, 8, join(dir, "a"));
  assert.notDeepEqual(readFileSync(other[0]), readFileSync(a[0]), "another seed gives another copy");
  const mtime = statSync(a[0]).mtimeMs;
  neighborDatabases(src, 2, 7, join(dir, "a"));
  assert.equal(statSync(a[0]).mtimeMs, mtime, "an existing copy is reused");

  const orig = new Database(src, { readonly: true });
  const labels = orig.prepare("SELECT label FROM parent ORDER BY label").pluck().all();
  for (const p of [...b, ...other]) {
    const db = new Database(p, { readonly: true });
    db.defaultSafeIntegers(true);
    assert.deepEqual(db.pragma("foreign_key_check"), []);
    // undeclared reference loose.parent_id -> parent.parent_id is respected too
    assert.equal(db.prepare("SELECT COUNT(*) FROM loose WHERE parent_id NOT IN (SELECT parent_id FROM parent)").pluck().get(), 0n);
    // referenced parents stay; some unreferenced ones go
    assert.equal(db.prepare("SELECT COUNT(*) FROM parent WHERE parent_id <= 12").pluck().get(), 12n);
    // unique and key columns keep their values; other columns keep their value multisets
    const kept = db.prepare("SELECT label FROM parent ORDER BY label").pluck().all();
    assert.ok(kept.every((l) => labels.includes(l)));
    const bigs = db.prepare("SELECT big FROM child").pluck().all() as bigint[];
    assert.ok(bigs.every((x) => x > 9007199254740993n), "large integers survive exactly");
    db.close();
  }
  const sizes = (p: string) => new Database(p, { readonly: true }).prepare("SELECT parent_id, size FROM parent ORDER BY parent_id").raw().all();
  assert.notDeepEqual(sizes(b[0]), orig.prepare("SELECT parent_id, size FROM parent ORDER BY parent_id").raw().all(), "non-key values move");
  orig.close();
});

test("K = 0 makes nothing; bad K is an error", () => {
  assert.deepEqual(neighborDatabases("/nonexistent.sqlite", 0), []);
  assert.throws(() => neighborDatabases("/nonexistent.sqlite", -1), /neighbors must be/);
  assert.throws(() => neighborDatabases("/nonexistent.sqlite", 1), /no database/);
});

test("databases with composite primary keys and foreign keys get neighbors (PRAGMA numbers arrive as bigints)", () => {
  const dir = scratchDir("t2s-nb-composite-");
  const src = join(dir, "c.sqlite");
  const db = new Database(src);
  db.exec(`CREATE TABLE a (x INTEGER, y INTEGER, label TEXT, PRIMARY KEY (x, y));
           CREATE TABLE b (id INTEGER PRIMARY KEY, ax INTEGER, ay INTEGER, note TEXT, FOREIGN KEY (ax, ay) REFERENCES a (x, y));
           CREATE UNIQUE INDEX b_note ON b (note);`);
  for (let i = 1; i <= 20; i++) db.prepare("INSERT INTO a VALUES (?, ?, ?)").run(i, i % 3, `l${i}`);
  for (let i = 1; i <= 10; i++) db.prepare("INSERT INTO b VALUES (?, ?, ?, ?)").run(i, i, i % 3, `n${i}`);
  db.close();
  const [copy] = neighborDatabases(src, 1, 0, join(dir, "nb"));
  const c = new Database(copy, { readonly: true });
  // every reference still points at a row; referenced rows were kept
  assert.equal(c.prepare("SELECT count(*) FROM b LEFT JOIN a ON a.x = b.ax AND a.y = b.ay WHERE a.x IS NULL").pluck().get(), 0);
  assert.ok((c.prepare("SELECT count(*) FROM a").pluck().get() as number) >= 10);
  c.close();
});
