/**
 * Live WAL-mode databases: a real writer process commits while the kit reads and grades. Grades follow the
 * committed rows (the gold cache never answers for a database whose -wal holds pages), every read is one
 * committed snapshot (never "malformed", never half a transaction), a database larger than a worker's memory
 * ceiling reads page by page, and no temporary file is made, so none is left behind by a killed worker.
 * Real SQLite files, real worker processes, a real env server on port 0 with a concurrent /health poller.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { copyFileSync, mkdirSync, readdirSync } from "node:fs";
import { join } from "node:path";
import { ExecutorPool } from "../../lib/db/pool.js";
import { call, lazyEnvServer } from "../envserve/fixture.js";
import { pollHealth } from "../envserve/health-poller.js";
import { scratchDir } from "../helpers.js";
import { startWalWriter } from "./wal-writer.js";

const dir = scratchDir("t2s-wal-live-");
const url = lazyEnvServer([dir], 2);

async function gradeOne(item: object): Promise<any> {
  const r = await call(await url(), "/v1/grade", { items: [item] });
  assert.equal(r.status, 200, r.text);
  return r.json.results[0];
}

async function tool(db: string, query: string): Promise<string> {
  const r = await call(await url(), "/v1/tool", { db, query });
  assert.equal(r.status, 200, r.text);
  return r.json.content as string;
}

test("a WAL database's grades follow its committed rows, as the tool sees them", async () => {
  const path = join(dir, "grades.sqlite");
  const writer = startWalWriter(path, { noCheckpoint: true });
  try {
    assert.equal(await writer.send("add 5"), "done 5");
    const item = (pred: string) => ({ db: path, gold: "SELECT count(*) FROM t", pred, reply: false });
    assert.equal((await gradeOne(item("SELECT 5"))).outcome, "correct");
    assert.equal(await tool(path, "SELECT count(*) AS n FROM t"), "n\n5");
    // two more commits, both only in the -wal file: the main file's bytes do not change
    assert.equal(await writer.send("add 1"), "done 6");
    assert.equal(await writer.send("add 1"), "done 7");
    assert.equal(await tool(path, "SELECT count(*) AS n FROM t"), "n\n7");
    assert.equal((await gradeOne(item("SELECT 7"))).outcome, "correct");
    assert.equal((await gradeOne(item("SELECT 5"))).outcome, "wrong_rows");
  } finally {
    await writer.close();
  }
  // closed cleanly: the commits are checkpointed into the main file, and the grades stay with them
  assert.deepEqual(readdirSync(dir).filter((f) => f.startsWith("grades.")), ["grades.sqlite"]);
  assert.equal((await gradeOne({ db: path, gold: "SELECT count(*) FROM t", pred: "SELECT 7", reply: false })).outcome, "correct");
});

test("reads of a database being written are each one committed snapshot: no malformed read, no wrong grade", async () => {
  const path = join(dir, "churn.sqlite");
  // checkpoints every few transactions over a 20 MB file: pages of the main file and the -wal turn over
  // all the time, as under a busy writer
  const writer = startWalWriter(path, { padBytes: 2000, checkpointPages: 50, keep: 200 });
  const poller = pollHealth(await url());
  try {
    for (let i = 0; i < 200; i++) await writer.send("add 50");
    assert.equal(await writer.send("churn 50"), "churning");
    // every committed state holds whole batches of 50 rows, so each answer must say 0 and 1
    const gold = "SELECT count(*) % 50, count(*) = 50 * count(DISTINCT batch) FROM t";
    const answers = await poller.during(async () => {
      const out: string[] = [];
      for (let i = 0; i < 24; i++) {
        const g = await gradeOne({ db: path, gold, pred: "SELECT 0, 1", reply: false });
        out.push(g.error ?? `${g.outcome}: ${g.reason}`);
        const t = await tool(path, "SELECT count(*) % 50 AS r, sum(length(pad)) / 2000 % 50 AS p FROM t");
        out.push(t === "r | p\n0 | 0" ? "tool ok" : `tool: ${t}`);
      }
      return out;
    });
    const transactions = Number((await writer.send("stop")).split(" ")[1]);
    assert.ok(transactions > 24, `the writer committed ${transactions} transactions during the reads`);
    const bad = answers.filter((a) => !a.startsWith("correct") && a !== "tool ok");
    assert.deepEqual(bad, [], `${bad.length} of ${answers.length} reads were not a committed snapshot`);
  } finally {
    await writer.send("stop").catch(() => undefined);
    await writer.close();
    await poller.stop();
  }
});

test("a WAL database larger than a worker's memory ceiling is read page by page, live or left by a crash, and no temporary file is made", async () => {
  const path = join(dir, "big.sqlite");
  const writer = startWalWriter(path, { noCheckpoint: true, padBytes: 10_000 });
  // the workers write any temporary file to this folder: it must stay empty, even when one is killed
  const tmp = scratchDir("t2s-wal-tmp-");
  const savedTmp = process.env.TMPDIR;
  process.env.TMPDIR = tmp;
  const small = new ExecutorPool({ workers: 1, spareWorkers: 0, memoryLimitMb: 128 });
  if (savedTmp === undefined) delete process.env.TMPDIR;
  else process.env.TMPDIR = savedTmp;
  try {
    // 200 MB of rows, all still in the -wal file of a writer that has it open
    for (let i = 0; i < 4; i++) await writer.send("add 5000");
    // the same files as a crash leaves them: main and -wal, no -shm
    const crashed = join(dir, "crashed");
    mkdirSync(crashed);
    copyFileSync(path, join(crashed, "big.sqlite"));
    copyFileSync(`${path}-wal`, join(crashed, "big.sqlite-wal"));
    for (const db of [path, join(crashed, "big.sqlite")]) {
      const read = small.execute(db, "SELECT count(*), sum(length(pad)) FROM t", { timeoutMs: 600_000 });
      // a copy made for the read would appear here; a worker killed while making it would leave it behind
      let killed = false;
      let settled = false;
      void read.finally(() => (settled = true));
      while (!settled) {
        const made = readdirSync(tmp).filter((f) => !f.startsWith("tsx"));
        if (made.length && !killed) {
          killed = true;
          for (const pid of small.busyWorkerPids()) process.kill(pid, "SIGKILL");
        }
        await new Promise((r) => setTimeout(r, 5));
      }
      const out = await read.catch((e: Error) => ({ ok: false as const, error: { kind: "rejected", message: e.message } }));
      assert.deepEqual(out.ok ? out.rows : out, [[20_000, 200_000_000]], db);
      assert.deepEqual(readdirSync(tmp).filter((f) => !f.startsWith("tsx")), [], "temporary files were made for the read");
      assert.equal(killed, false);
    }
  } finally {
    await small.close();
    await writer.close();
  }
});
