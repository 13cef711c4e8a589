/**
 * `t2s env serve` against hostile database files: a database over 2 GiB is hashed off the event loop (and
 * graded at all), and a path whose symbolic links are swapped between the root check and the open never
 * reads a database outside the roots. Real SQLite files, real worker processes, a real server on port 0 with
 * a concurrent /health poller.
 */
import { test, after } from "node:test";
import assert from "node:assert/strict";
import { mkdirSync, truncateSync } from "node:fs";
import { join } from "node:path";
import Database from "better-sqlite3";
import { ExecutorPool } from "../../lib/db/pool.js";
import { EnvService } from "../../lib/envserve/service.js";
import { startEnvServer, type RunningEnvServer } from "../../lib/envserve/server.js";
import { scratchDir } from "../helpers.js";
import { call } from "./fixture.js";
import { pollHealth } from "./health-poller.js";

const root = scratchDir("t2s-attack-files-");
const pool = new ExecutorPool({ workers: 1, spareWorkers: 1 });
const service = new EnvService({ executor: pool, tasks: [], dbRoots: [root] });
let server: RunningEnvServer;
after(async () => {
  await server?.close();
  await pool.close();
});

async function url(): Promise<string> {
  server ??= await startEnvServer({ service, port: 0 });
  return server.url;
}

/** A SQLite file with table t of `rows` rows. */
function makeDb(path: string, rows: number[]): string {
  const db = new Database(path);
  db.exec("CREATE TABLE t (x INTEGER)");
  const insert = db.prepare("INSERT INTO t VALUES (?)");
  for (const x of rows) insert.run(x);
  db.close();
  return path;
}

test("a database over 2 GiB is graded, and /health answers while it is hashed", async () => {
  mkdirSync(join(root, "big"));
  const path = makeDb(join(root, "big", "huge.sqlite"), [1, 2, 3]);
  // past 2 GiB (Node reads no file that large at once), sparse: SQLite reads the pages its header counts
  truncateSync(path, 2 ** 31 + 64 * 1024);
  const poller = pollHealth(await url());
  try {
    const r = await poller.during(() => call(server.url, "/v1/grade", { items: [{ db: path, gold: "SELECT count(*) FROM t", pred: "SELECT 3", reply: false }] }));
    assert.equal(r.status, 200, r.text);
    assert.equal(r.json.results[0].outcome, "correct", JSON.stringify(r.json.results[0]));
  } finally {
    await poller.stop();
  }
});
