/**
 * scripts/run-tests.mjs ends a run by naming what it skipped, why, and the command that runs those tests;
 * with T2S_NO_SKIPS=1 (as CI runs it) a skipped test fails the run.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { HANG_GUARD_MS } from "../helpers.js";

/** The runner as a shell starts it (without this test run's NODE_TEST_CONTEXT, which makes node:test refuse to nest). */
function run(env: Record<string, string>, files = ["test/fixtures/runner/one-skip.ts"]) {
  const base = { ...process.env };
  delete base.NODE_TEST_CONTEXT;
  return spawnSync(process.execPath, ["scripts/run-tests.mjs", ...files], { encoding: "utf8", env: { ...base, ...env }, timeout: HANG_GUARD_MS });
}

test("a skipped test fails the run with T2S_NO_SKIPS=1, and only then", () => {
  const strict = run({ T2S_NO_SKIPS: "1" });
  assert.equal(strict.status, 1, strict.stdout + strict.stderr);
  assert.match(strict.stderr, /error \[tests_skipped\]: 1 test\(s\) skipped with T2S_NO_SKIPS=1:\n {2}needs a device: no device here\n/);
  const plain = run({ T2S_NO_SKIPS: "" });
  assert.equal(plain.status, 0, plain.stdout + plain.stderr);
  assert.match(plain.stdout, /skipped 1/);
});

test("the last lines of a run name each kind of skip: the count, why, and the one command that runs them", () => {
  const r = run({ T2S_NO_SKIPS: "" }, ["test/fixtures/runner/one-skip.ts", "test/fixtures/runner/webgpu-skip.ts", "test/fixtures/runner/jupyter-skip.ts"]);
  assert.equal(r.status, 0, r.stdout + r.stderr);
  const expected = [
    "not run: 3 test(s) skipped",
    "  1 skipped: no WebGPU adapter here (no GPU, or no Vulkan driver)",
    "    run them: bash scripts/lavapipe.sh run npm test   (Mesa's software Vulkan driver, as CI runs them; needs apt-get)",
    "  1 skipped: Debian's Jupyter packages are not installed",
    "    run them: npm run setup:system   (apt-get, as root or with sudo), then npm test",
    "  1 skipped: no device here (needs a device)",
  ];
  assert.deepEqual(r.stdout.trimEnd().split("\n").slice(-expected.length), expected);
});
