#!/usr/bin/env node
// Runs every test/**/*.test.ts file (or the paths given) with node's built-in test runner through tsx.
// Node 20's --test does not expand globs or find .ts files itself, so the list is built here.
// T2S_NO_SKIPS=1 (CI sets it) makes a skipped test a failure: the WebGPU tests skip without an adapter,
// and CI runs them on Mesa's software driver (scripts/lavapipe.sh), so a skip there means a lost check.
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { spawnSync } from "node:child_process";

function findTests(dir) {
  const out = [];
  for (const name of readdirSync(dir).sort()) {
    const p = join(dir, name);
    if (statSync(p).isDirectory()) out.push(...findTests(p));
    else if (name.endsWith(".test.ts")) out.push(p);
  }
  return out;
}

/** The skipped tests a TAP report lists, as "name: reason". */
function skippedTests(tap) {
  return tap.split("\n").flatMap((line) => {
    const m = /^\s*ok \d+ - (.*?) # SKIP\s*(.*)$/.exec(line);
    return m ? [`${m[1]}: ${m[2]}`] : [];
  });
}

const args = process.argv.slice(2);
const files = args.length ? args.flatMap((a) => (statSync(a).isDirectory() ? findTests(a) : [a])) : findTests("test");
const noSkips = process.env.T2S_NO_SKIPS === "1";
const tapDir = noSkips ? mkdtempSync(join(tmpdir(), "t2s-tests-")) : null;
const reporters = ["--test-reporter=spec", "--test-reporter-destination=stdout"];
if (tapDir) reporters.push("--test-reporter=tap", `--test-reporter-destination=${join(tapDir, "report.tap")}`);
const result = spawnSync(process.execPath, ["--import", "tsx", "--test", ...reporters, ...files], {
  stdio: "inherit",
  env: { ...process.env, T2S_TEST: "1" },
});
let status = result.status ?? 1;
if (tapDir) {
  const tap = join(tapDir, "report.tap");
  const skipped = existsSync(tap) ? skippedTests(readFileSync(tap, "utf8")) : ["(no TAP report was written: the run did not start)"];
  rmSync(tapDir, { recursive: true, force: true });
  if (skipped.length) {
    process.stderr.write(`error [tests_skipped]: ${skipped.length} test(s) skipped with T2S_NO_SKIPS=1:\n${skipped.map((s) => `  ${s}`).join("\n")}\n`);
    status = status || 1;
  }
}
process.exit(status);
