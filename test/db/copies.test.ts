import { test } from "node:test";
import assert from "node:assert/strict";
import Database from "better-sqlite3";
import { appendFileSync, copyFileSync, statSync, chmodSync, utimesSync } from "node:fs";
import { join } from "node:path";
import { assertUnchanged, CopyRegistry, fileSha256, privateCopy } from "../../lib/db/copies.js";
import { isT2sError } from "../../lib/core/errors.js";
import { scratchDir } from "../helpers.js";
import { makeFixtureDb } from "./fixture.js";

test("a private copy has the same hash, is read-only and is reused", () => {
  const src = makeFixtureDb();
  const dir = scratchDir("t2s-copies-");
  const a = privateCopy(src, dir);
  assert.equal(a.sha256, fileSha256(src));
  assert.equal(fileSha256(a.path), a.sha256);
  assert.equal(statSync(a.path).mode & 0o222, 0);
  assert.match(a.path, new RegExp(`fixture-${a.sha256.slice(0, 12)}\\.sqlite$`));
  const b = privateCopy(src, dir);
  assert.equal(b.path, a.path);
});

test("the registry reports an original or a copy that changed on disk", () => {
  const src = makeFixtureDb();
  const reg = new CopyRegistry(scratchDir("t2s-reg-"));
  const copy = reg.get(src);
  assert.deepEqual(reg.get(src), copy);
  // touching the file without changing its bytes is fine
  const later = new Date(Date.now() + 5000);
  utimesSync(src, later, later);
  assert.deepEqual(reg.get(src), copy);
  const db = new Database(src);
  db.exec("INSERT INTO items (name) VALUES ('changed')");
  db.close();
  assert.throws(() => reg.get(src), (e) => isT2sError(e, "db_changed") && /changed on disk/.test(e.message));

  const src2 = makeFixtureDb();
  const copy2 = reg.get(src2);
  chmodSync(copy2.path, 0o644);
  appendFileSync(copy2.path, "tampered");
  assert.throws(() => reg.get(src2), (e) => isT2sError(e, "db_changed"));
});

test("assertUnchanged and missing files give clear errors", () => {
  const src = makeFixtureDb();
  const sha = fileSha256(src);
  assertUnchanged(src, sha);
  const other = join(scratchDir(), "other.sqlite");
  copyFileSync(src, other);
  appendFileSync(other, "x");
  assert.throws(() => assertUnchanged(other, sha), (e) => isT2sError(e, "db_changed"));
  assert.throws(() => privateCopy(join(scratchDir(), "none.sqlite")), (e) => isT2sError(e, "no_database"));
});
