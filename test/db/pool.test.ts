import { test } from "node:test";
import assert from "node:assert/strict";
import { join } from "node:path";
import { ExecutorPool, withExecutor } from "../../lib/db/pool.js";
import type { Executor } from "../../lib/db/types.js";
import { isT2sError } from "../../lib/core/errors.js";
import { HANG_GUARD_MS, scratchDir } from "../helpers.js";
import { makeFixtureDb } from "./fixture.js";

const dir = scratchDir("t2s-pool-");
const db = makeFixtureDb(dir);

test("withExecutor runs, answers many concurrent calls correctly, then closes", async () => {
  let kept: Executor | undefined;
  const sums = await withExecutor(
    async (ex) => {
      kept = ex;
      const calls = Array.from({ length: 60 }, (_, i) => ex.execute(db, `SELECT ${i} AS i, count(*) AS n FROM tags WHERE item_id = ${(i % 3) + 1}`));
      const out = await Promise.all(calls);
      return out.map((o) => (o.ok ? (o.rows[0][0] as number) + (o.rows[0][1] as number) : -1));
    },
    { workers: 2, spareWorkers: 0 },
  );
  assert.deepEqual(sums, Array.from({ length: 60 }, (_, i) => i + 100));
  await assert.rejects(kept!.execute(db, "SELECT 1"), (e) => isT2sError(e, "pool_closed"));
});

test("results cross the process boundary intact; options and paths are checked", async () => {
  const pool = new ExecutorPool({ workers: 1, spareWorkers: 0 });
  try {
    const r = await pool.execute(db, "SELECT id, name, price, data FROM items ORDER BY id", { maxRows: 2 });
    assert.deepEqual(r, { ok: true, columns: ["id", "name", "price", "data"], rows: [[1, "apple", 1.5, { blob: "00ff10" }], [2, "pear", null, null]], elapsedMs: r.ok ? r.elapsedMs : 0, truncated: true });
    // integers beyond 2^53 stay exact (bigint) instead of collapsing onto the nearest double
    const inf = await pool.execute(db, "SELECT 1e999 AS up, -1e999 AS down, 9007199254740993 AS big, 9007199254740991 AS safe");
    assert.deepEqual(inf.ok && inf.rows, [[Infinity, -Infinity, 9007199254740993n, 9007199254740991]]);
    const missing = await pool.execute(join(dir, "missing.sqlite"), "SELECT 1");
    assert.equal(!missing.ok && missing.error.kind, "no_database");
    const empty = await pool.execute("", "SELECT 1");
    assert.equal(!empty.ok && empty.error.kind, "no_database");
    await assert.rejects(pool.execute(db, "SELECT 1", { timeoutMs: 0 }), (e) => isT2sError(e, "bad_exec_options"));
    await assert.rejects(pool.execute(db, "SELECT 1", { maxRows: -1 }), (e) => isT2sError(e, "bad_exec_options"));
    assert.throws(() => new ExecutorPool({ workers: 0 }), (e) => isT2sError(e, "bad_pool_options"));
    assert.equal(pool.stats().completed, 3);
  } finally {
    await pool.close();
  }
});

test("closing a pool whose workers are still starting settles (in a script that does nothing else)", async () => {
  // The workers are unref'd while idle; close() must keep the process alive until they have exited,
  // otherwise a script ends with close() never settled (exit code 13 for a top-level await).
  const { spawnSync } = await import("node:child_process");
  const script = `import { ExecutorPool } from ${JSON.stringify(join(process.cwd(), "lib/db/pool.ts"))};
for (const delay of [0, 10]) {
  const pool = new ExecutorPool({ workers: 1 });
  await new Promise((r) => setTimeout(r, delay));
  await pool.close();
}
console.log("closed");`;
  const dir = scratchDir();
  const file = join(dir, "close.mts");
  (await import("node:fs")).writeFileSync(file, script);
  const r = spawnSync(process.execPath, ["--import", "tsx", file], { encoding: "utf8", timeout: HANG_GUARD_MS });
  assert.equal(r.status, 0, r.stderr);
  assert.match(r.stdout, /closed/);
});
