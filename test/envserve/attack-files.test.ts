/**
 * `t2s env serve` against hostile database files: a database over 2 GiB is hashed off the event loop (and
 * graded at all), and a path whose symbolic links are swapped between the root check and the open never
 * reads a database outside the roots. Real SQLite files, real worker processes, a real server on port 0 with
 * a concurrent /health poller.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { spawn, spawnSync } from "node:child_process";
import { closeSync, constants, mkdirSync, openSync, symlinkSync, truncateSync } from "node:fs";
import { join } from "node:path";
import Database from "better-sqlite3";
import { scratchDir } from "../helpers.js";
import { call, lazyEnvServer, startEnvChild } from "./fixture.js";
import { pollHealth } from "./health-poller.js";

const root = scratchDir("t2s-attack-files-");
const url = lazyEnvServer([root], 1);

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
  const base = await url();
  const poller = pollHealth(base);
  try {
    const r = await poller.during(() => call(base, "/v1/grade", { items: [{ db: path, gold: "SELECT count(*) FROM t", pred: "SELECT 3", reply: false }] }));
    assert.equal(r.status, 200, r.text);
    assert.equal(r.json.results[0].outcome, "correct", JSON.stringify(r.json.results[0]));
  } finally {
    await poller.stop();
  }
});

/** A process that swaps links under the root as fast as it can, until its stdin closes. */
function startSwapper(script: string, args: string[]): { stop(): Promise<void> } {
  const child = spawn(process.execPath, ["-e", script, ...args], { stdio: ["pipe", "ignore", "inherit"] });
  return {
    stop: () =>
      new Promise((resolve) => {
        if (child.exitCode !== null) return resolve();
        child.once("exit", () => resolve());
        child.stdin!.end();
      }),
  };
}

// root/link -> root/inside or -> the outside folder, swapped atomically (a new link renamed over the old one)
const SWAP_LINK = `
const fs = require("node:fs");
const [link, inside, outside] = process.argv.slice(1);
let stop = false;
process.stdin.on("end", () => (stop = true)).resume();
const loop = (i) => { if (stop) return; try { fs.symlinkSync(i % 2 ? outside : inside, link + ".new"); fs.renameSync(link + ".new", link); } catch {} setImmediate(loop, i + 1); };
loop(0);`;

// root/real is a folder, then (moved aside) a link to the outside folder, then the folder again
const SWAP_FOLDER = `
const fs = require("node:fs");
const [dir, outside] = process.argv.slice(1);
let stop = false;
process.stdin.on("end", () => { stop = true; }).resume();
const loop = () => {
  if (stop) return;
  try { fs.renameSync(dir, dir + ".away"); fs.symlinkSync(outside, dir); fs.unlinkSync(dir); fs.renameSync(dir + ".away", dir); } catch {}
  setImmediate(loop);
};
loop();`;

test("links swapped between the root check and the open never lead a read outside the roots", async () => {
  const outside = scratchDir("t2s-outside-");
  makeDb(join(outside, "db.sqlite"), [666]);
  mkdirSync(join(root, "inside"));
  makeDb(join(root, "inside", "db.sqlite"), [1]);
  mkdirSync(join(root, "real"));
  makeDb(join(root, "real", "db.sqlite"), [1]);
  symlinkSync(join(root, "inside"), join(root, "link"));
  const u = await url();
  const cases: Array<[string, string, string[]]> = [
    [join(root, "link", "db.sqlite"), SWAP_LINK, [join(root, "link"), join(root, "inside"), outside]],
    [join(root, "real", "db.sqlite"), SWAP_FOLDER, [join(root, "real"), outside]],
  ];
  for (const [db, script, args] of cases) {
    const swapper = startSwapper(script, args);
    const seen: string[] = [];
    try {
      for (let i = 0; i < 60; i++) {
        const t = await call(u, "/v1/tool", { db, query: "SELECT x FROM t" });
        seen.push(t.status === 200 ? t.json.content : `${t.status}`);
        const g = await call(u, "/v1/grade", { items: [{ db, gold: "SELECT 666", pred: "SELECT x FROM t", reply: false }] });
        const r = g.json?.results?.[0];
        seen.push(r?.outcome === "correct" ? "x\n666" : "graded");
      }
    } finally {
      await swapper.stop();
    }
    assert.equal(seen.filter((c) => /\b666\b/.test(c)).length, 0, `${db}: the outside database was read`);
    assert.ok(seen.some((c) => c === "x\n1"), `${db}: the inside database was read at all (${[...new Set(seen)].slice(0, 5).join(" / ")})`);
  }
});

test("a FIFO under a root is refused before anything opens it: the server never blocks in open()", async () => {
  const dir = scratchDir("t2s-fifo-root-");
  const fifo = join(dir, "fifo.sqlite");
  assert.equal(spawnSync("mkfifo", [fifo]).status, 0);
  const server = await startEnvChild(["--db-root", dir, "--workers", "1"]);
  try {
    for (const [path, body] of [["/v1/prompt", { db: fifo, question: "how many?" }], ["/v1/tool", { db: fifo, query: "SELECT 1" }], ["/v1/grade", { items: [{ db: fifo, gold: "SELECT 1", pred: "SELECT 1" }] }]] as const) {
      let settled = false;
      const answer = call(server.url, path, body).finally(() => (settled = true));
      // a reader blocked in open() on the FIFO lets a non-blocking writer open it: that is the server
      // stuck (open and close it, so the server goes on); a refusal never gets that far
      let blocked = false;
      while (!settled) {
        try {
          closeSync(openSync(fifo, constants.O_WRONLY | constants.O_NONBLOCK));
          blocked = true;
        } catch {
          // ENXIO: nobody has it open for reading
        }
        await new Promise((r) => setImmediate(r));
      }
      const r = await answer;
      assert.equal(blocked, false, `${path}: the server opened the FIFO`);
      if (path === "/v1/grade") assert.match(r.json.results[0].error, /not a regular file/);
      else assert.equal(r.status, 400, r.text);
      assert.equal((await call(server.url, "/health")).status, 200);
    }
  } finally {
    await server.stop();
  }
});
