/**
 * `npm run bench:grade` in a copy of the clone with nothing beside it (no ../shared): without the reference
 * grader it prints its own tables, notes the skipped ones, and exits 0. Small sizes: this checks that the
 * bench runs on what a clone has, not its numbers.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { cpSync, mkdirSync, readdirSync, symlinkSync } from "node:fs";
import { join } from "node:path";
import { HANG_GUARD_MS, repoRoot, scratchDir } from "../helpers.js";

/** The parts of the clone the bench uses, copied (so ../shared is not beside them); node_modules linked entry by entry. */
function cloneWithNothingBeside(): string {
  const clone = join(scratchDir("t2s-bench-clone-"), "t2s-lab");
  for (const part of ["lib", "bin", "bench", "package.json", "tsconfig.json", join("data", "shop")]) cpSync(join(repoRoot, part), join(clone, part), { recursive: true });
  mkdirSync(join(clone, "node_modules"));
  for (const entry of readdirSync(join(repoRoot, "node_modules"))) symlinkSync(join(repoRoot, "node_modules", entry), join(clone, "node_modules", entry));
  return clone;
}

test("bench:grade on a clone without ../shared skips the reference grader's rows with a note and exits 0", () => {
  const clone = cloneWithNothingBeside();
  const r = spawnSync(process.execPath, ["--import", "tsx", "bench/grade.ts", "--pairs", "20", "--runs", "1", "--grades", "20", "--workers", "2"], {
    cwd: clone, encoding: "utf8", timeout: HANG_GUARD_MS,
  });
  assert.equal(r.status, 0, r.stdout + r.stderr);
  assert.match(r.stdout, /end to end against the reference grader: skipped, \S+\/shared\/reference\/refgrader\.py is not here \(it is not part of the clone\)/);
  assert.match(r.stdout, /t2s grade --jsonl <\/dev\/null/);
  assert.doesNotMatch(r.stdout, /refgrader\.py --jsonl/);
  assert.match(r.stdout, /inside the process: .* 20 grades per row/);
  assert.equal(r.stderr, "");
});
