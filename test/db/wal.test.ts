import { test } from "node:test";
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import Database from "better-sqlite3";
import { copyFileSync, mkdirSync, readdirSync } from "node:fs";
import { join } from "node:path";
import { repoRoot, runCli, scratchDir, t2sBin } from "../helpers.js";

/** A WAL-mode database; with `pending`, its last insert still sits in the -wal file (no checkpoint yet). */
function walDb(dir: string, pending: boolean): string {
  const path = join(dir, "w.sqlite");
  const db = new Database(path);
  db.pragma("journal_mode = WAL");
  db.exec("CREATE TABLE t (x INTEGER); INSERT INTO t VALUES (1), (2);");
  if (!pending) {
    db.close(); // the last connection checkpoints and removes -wal and -shm
    return path;
  }
  db.pragma("wal_autocheckpoint = 0");
  db.exec("INSERT INTO t VALUES (3);");
  // copy the files while the writer still has them open, as a crash would leave them
  const snap = join(dir, "snap");
  mkdirSync(snap);
  copyFileSync(path, join(snap, "w.sqlite"));
  copyFileSync(`${path}-wal`, join(snap, "w.sqlite-wal"));
  db.close();
  return join(snap, "w.sqlite");
}

test("a WAL-mode database is read without creating -wal or -shm files beside it", async () => {
  const path = walDb(scratchDir(), false);
  const r = await runCli(["exec", "--db", path, "SELECT count(*) AS n FROM t", "--json"]);
  assert.equal(r.code, 0, r.stderr);
  assert.deepEqual(JSON.parse(r.stdout).rows, [[2]]);
  assert.deepEqual(readdirSync(join(path, "..")), ["w.sqlite"]);
});

test("committed rows still in a -wal file are read, and the -wal file is left as it was", async () => {
  const path = walDb(scratchDir(), true);
  const r = await runCli(["exec", "--db", path, "SELECT count(*) AS n FROM t", "--json"]);
  assert.equal(r.code, 0, r.stderr);
  assert.deepEqual(JSON.parse(r.stdout).rows, [[3]]);
  assert.deepEqual(readdirSync(join(path, "..")).sort(), ["w.sqlite", "w.sqlite-wal"]);
});

const unshareArgs = process.getuid?.() === 0 ? ["-m"] : ["-Urm"];
const canMount = spawnSync("unshare", [...unshareArgs, "sh", "-c", "mount -t tmpfs -o size=64k tmpfs /mnt"]).status === 0;

test("a WAL-mode database on read-only storage can be read", { skip: canMount ? false : "needs mount namespaces (unshare) for a read-only bind mount" }, () => {
  for (const pending of [false, true]) {
    const path = walDb(scratchDir(), pending);
    const folder = join(path, "..");
    // a read-only bind mount of the folder, in a private mount namespace (even root cannot write there)
    const script = `mount --bind -o ro "$1" "$1" && ! touch "$1/probe" 2>/dev/null && exec "$2" "$3" exec --db "$4" "SELECT count(*) AS n FROM t" --json`;
    const r = spawnSync("unshare", [...unshareArgs, "sh", "-c", script, "sh", folder, process.execPath, t2sBin, path], { cwd: repoRoot, encoding: "utf8" });
    assert.equal(r.status, 0, r.stderr);
    assert.deepEqual(JSON.parse(r.stdout).rows, [[pending ? 3 : 2]]);
  }
});
