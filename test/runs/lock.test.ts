import { test } from "node:test";
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { existsSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { lockRows } from "../../lib/runs/lock.js";
import { scratchDir } from "../helpers.js";

test("one writer per rows file: a live holder refuses, a dead holder's lock is taken over, release removes it", () => {
  const rows = join(scratchDir(), "rows.jsonl");
  const release = lockRows(rows);
  assert.ok(existsSync(`${rows}.lock`));
  // a different live process (the parent of this test) holds it
  writeFileSync(`${rows}.lock`, String(process.ppid));
  assert.throws(() => lockRows(rows), /being written by process/);
  // a process that has exited
  const dead = spawnSync(process.execPath, ["-e", "process.stdout.write(String(process.pid))"]).stdout.toString();
  writeFileSync(`${rows}.lock`, dead);
  const again = lockRows(rows);
  again();
  assert.ok(!existsSync(`${rows}.lock`));
  release();
});
