import { test } from "node:test";
import assert from "node:assert/strict";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import type { ExecOutcome } from "../../lib/db/types.js";
import { GoldCache } from "../../lib/verifier/goldcache.js";
import { databaseHash, databaseState } from "../../lib/db/dbstate.js";
import { scratchDir } from "../helpers.js";

const ok = (v: number): ExecOutcome => ({ ok: true, columns: ["x"], rows: [[v]], elapsedMs: 0, truncated: false });

test("the LRU keeps recently used keys and evicts the oldest", async () => {
  const cache = new GoldCache(2);
  let runs = 0;
  const run = (v: number) => () => {
    runs++;
    return Promise.resolve(ok(v));
  };
  await cache.getOrRun("a", run(1));
  await cache.getOrRun("b", run(2));
  await cache.getOrRun("a", run(99)); // hit: a becomes most recent
  await cache.getOrRun("c", run(3)); // evicts b
  assert.equal(cache.size, 2);
  assert.equal(runs, 3);
  const a = await cache.getOrRun("a", run(100));
  assert.deepEqual(a.ok && a.rows, [[1]]);
  await cache.getOrRun("b", run(4));
  assert.equal(runs, 4, "b was evicted and ran again");
  assert.deepEqual([cache.hits, cache.misses], [2, 4]);
  assert.throws(() => new GoldCache(0), /capacity/);
});

test("a rejected run is forgotten so the next call retries; a failed outcome is kept", async () => {
  const cache = new GoldCache();
  await assert.rejects(cache.getOrRun("k", () => Promise.reject(new Error("pool closed"))));
  await new Promise((r) => setImmediate(r));
  assert.equal(cache.size, 0);
  const failed: ExecOutcome = { ok: false, error: { kind: "syntax", message: "bad" } };
  await cache.getOrRun("f", () => Promise.resolve(failed));
  let again = false;
  await cache.getOrRun("f", () => {
    again = true;
    return Promise.resolve(ok(1));
  });
  assert.equal(again, false);
});

test("database hashes follow the file's content, the -wal file's too", async () => {
  const dir = scratchDir("t2s-hash-");
  const p = join(dir, "x.sqlite");
  writeFileSync(p, "one");
  const h1 = await databaseHash(databaseState(p));
  assert.equal(h1, "7692c3ad3540bb803c020b3aee66cd8887123234ea0c6e7143c0add73ff431ed");
  writeFileSync(p, "other content");
  const h2 = await databaseHash(databaseState(p));
  assert.notEqual(h2, h1);
  writeFileSync(`${p}-wal`, "committed pages");
  assert.equal(databaseState(p).live, true);
  const h3 = await databaseHash(databaseState(p));
  assert.notEqual(h3, h2);
  writeFileSync(`${p}-wal`, "more committed pages");
  assert.notEqual(await databaseHash(databaseState(p)), h3);
  assert.throws(() => databaseState(join(dir, "missing.sqlite")), /no database file/);
});
