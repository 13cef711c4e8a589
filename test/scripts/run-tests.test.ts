/** scripts/run-tests.mjs with T2S_NO_SKIPS=1 (as CI runs it) fails on a skipped test and names it. */
import { test } from "node:test";
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";

/** The runner as a shell starts it (without this test run's NODE_TEST_CONTEXT, which makes node:test refuse to nest). */
function run(env: Record<string, string>) {
  const base = { ...process.env };
  delete base.NODE_TEST_CONTEXT;
  return spawnSync(process.execPath, ["scripts/run-tests.mjs", "test/fixtures/runner/one-skip.ts"], { encoding: "utf8", env: { ...base, ...env }, timeout: 120_000 });
}

test("a skipped test fails the run with T2S_NO_SKIPS=1, and only then", () => {
  const strict = run({ T2S_NO_SKIPS: "1" });
  assert.equal(strict.status, 1, strict.stdout + strict.stderr);
  assert.match(strict.stderr, /error \[tests_skipped\]: 1 test\(s\) skipped with T2S_NO_SKIPS=1:\n {2}needs a device: no device here\n/);
  const plain = run({ T2S_NO_SKIPS: "" });
  assert.equal(plain.status, 0, plain.stdout + plain.stderr);
  assert.match(plain.stdout, /skipped 1/);
});
