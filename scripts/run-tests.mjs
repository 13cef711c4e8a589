#!/usr/bin/env node
// Runs every test/**/*.test.ts file (or the paths given) with node's built-in test runner through tsx.
// Node 20's --test does not expand globs or find .ts files itself, so the list is built here.
// The run ends by naming what it did not run: how many tests skipped, why, and the one command that runs
// them. T2S_NO_SKIPS=1 (CI sets it) makes a skipped test a failure: the WebGPU tests skip without an adapter,
// and CI runs them on Mesa's software driver (scripts/lavapipe.sh), so a skip there means a lost check.
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync } from "node:fs";
import { availableParallelism, tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { spawnSync } from "node:child_process";
import { distIsFresh } from "../bin/dist-check.js";

/**
 * Why tests skip, by the words their skip reason holds, and the one command that runs them. The tests
 * word their reasons this way (test/helpers.ts: needsJupyter, needsChromium; the WebGPU tests: "no WebGPU
 * adapter: ..."); a reason not listed here is shown as it is.
 */
const SKIP_KINDS = [
  { match: /no WebGPU adapter/, why: "no WebGPU adapter here (no GPU, or no Vulkan driver)", run: "bash scripts/lavapipe.sh run npm test   (Mesa's software Vulkan driver, as CI runs them; needs apt-get)" },
  { match: /needs Jupyter/, why: "Debian's Jupyter packages are not installed", run: "npm run setup:system   (apt-get, as root or with sudo), then npm test" },
  { match: /classic Jupyter Notebook/, why: "Debian's classic Jupyter Notebook (jupyter-notebook) is not installed", run: "npm run setup:system   (apt-get, as root or with sudo), then npm test" },
  { match: /needs Chromium/, why: "Debian's Chromium is not installed", run: "npm run setup:system   (apt-get, as root or with sudo), then npm test" },
  { match: /mount namespaces/, why: "no mount namespaces here (unshare)", run: "npm test as root, or where unprivileged user namespaces are allowed" },
  { match: /spider-dev-mini/, why: "../shared/spider-dev-mini (Spider's dev set) is not beside the clone", run: "put it at ../shared/spider-dev-mini, then npm test" },
  { match: /python3 is not installed/, why: "python3 is not installed", run: "apt-get install python3, then npm test" },
];

/**
 * Test files run this many at a time (T2S_TEST_CONCURRENCY overrides): node's default is one fewer than the
 * cores, so one file at a time on 2 cores, while most files wait on child processes, servers and kernels.
 */
const CONCURRENCY = Number(process.env.T2S_TEST_CONCURRENCY) || Math.max(2, availableParallelism());

/**
 * Files that run after the others, one at a time: their tests hold a mechanism to a short explicit limit
 * (a 1 s request timeout, runaway queries stopped at 400 ms, a lane wait of a quarter of 4 s) or open
 * 1,500 sockets, which a second busy file on the machine would crowd without any fault of the kit.
 */
const SERIAL = new Set(["test/serve/access.test.ts", "test/db/lanes.test.ts", "test/db/hostile.test.ts", "test/runs/benchmark.test.ts"]);

function findTests(dir) {
  const out = [];
  for (const name of readdirSync(dir).sort()) {
    const p = join(dir, name);
    if (statSync(p).isDirectory()) out.push(...findTests(p));
    else if (name.endsWith(".test.ts")) out.push(p);
  }
  return out;
}

/** The skipped tests a TAP report lists, as { name, reason }. */
function skippedTests(tap) {
  return tap.split("\n").flatMap((line) => {
    const m = /^\s*ok \d+ - (.*?) # SKIP\s*(.*)$/.exec(line);
    return m ? [{ name: m[1], reason: m[2] }] : [];
  });
}

/** The closing lines about skipped tests: per kind of reason, the count, the reason and the command that runs them. */
function skipSummary(skipped) {
  const groups = new Map();
  for (const s of skipped) {
    const kind = SKIP_KINDS.find((k) => k.match.test(s.reason)) ?? { why: s.reason || "(no reason given)", run: null };
    const g = groups.get(kind.why) ?? { kind, tests: [] };
    g.tests.push(s);
    groups.set(kind.why, g);
  }
  const lines = [`not run: ${skipped.length} test(s) skipped`];
  // the known kinds in their table order, then other reasons alphabetically: the same lines every run
  const rank = (g) => (SKIP_KINDS.includes(g.kind) ? SKIP_KINDS.indexOf(g.kind) : SKIP_KINDS.length);
  const ordered = [...groups.values()].sort((a, b) => rank(a) - rank(b) || a.kind.why.localeCompare(b.kind.why));
  for (const { kind, tests } of ordered) {
    lines.push(`  ${tests.length} skipped: ${kind.why}${kind.run ? "" : ` (${tests.map((t) => t.name).join("; ")})`}`);
    if (kind.run) lines.push(`    run them: ${kind.run}`);
  }
  return lines.join("\n") + "\n";
}

/** Runs files with node's test runner, `concurrency` at a time; returns its exit status and the skips its TAP report lists (null: no report). */
function runFiles(files, concurrency) {
  const tapDir = mkdtempSync(join(tmpdir(), "t2s-tests-"));
  const tap = join(tapDir, "report.tap");
  const reporters = ["--test-reporter=spec", "--test-reporter-destination=stdout", "--test-reporter=tap", `--test-reporter-destination=${tap}`];
  const result = spawnSync(process.execPath, ["--import", "tsx", "--test", `--test-concurrency=${concurrency}`, ...reporters, ...files], {
    stdio: "inherit",
    env: { ...process.env, T2S_TEST: "1" },
  });
  const report = existsSync(tap) ? readFileSync(tap, "utf8") : null;
  rmSync(tapDir, { recursive: true, force: true });
  return { status: result.status ?? 1, skipped: report === null ? null : skippedTests(report) };
}

/**
 * Rebuilds dist/ first when lib/ has changed since the last build (a pull, an edit): `t2s` runs the compiled
 * dist/ only while it matches lib/, else the TypeScript through tsx, which costs about a second more of CPU
 * at each of the suite's several hundred `t2s` starts. A fresh `npm ci` has built it already.
 */
const root = join(dirname(fileURLToPath(import.meta.url)), "..");
if (!distIsFresh(join(root, "lib"), join(root, "dist"))) {
  process.stdout.write("dist/ is older than lib/: rebuilding it (npm run build) so t2s starts from compiled code\n");
  const built = spawnSync(process.execPath, [join(root, "scripts", "build.mjs")], { stdio: "inherit" });
  if (built.status !== 0) {
    process.stderr.write("error [build_failed]: npm run build failed; the tests would run t2s from stale or missing compiled code\n");
    process.exit(1);
  }
}

const args = process.argv.slice(2);
const files = args.length ? args.flatMap((a) => (statSync(a).isDirectory() ? findTests(a) : [a])) : findTests("test");
const together = files.filter((f) => !SERIAL.has(f));
const alone = files.filter((f) => SERIAL.has(f));
const noSkips = process.env.T2S_NO_SKIPS === "1";
const phases = [together.length ? runFiles(together, CONCURRENCY) : null, alone.length ? runFiles(alone, 1) : null].filter(Boolean);
let status = Math.max(...phases.map((p) => p.status));
if (phases.some((p) => p.skipped === null)) {
  process.stderr.write("error [tests_not_run]: the test runner wrote no report: the run did not start\n");
  status = status || 1;
} else {
  const skipped = phases.flatMap((p) => p.skipped);
  if (alone.length && together.length) process.stdout.write(`\n${together.length} test files ran ${CONCURRENCY} at a time, then ${alone.length} one at a time (${alone.join(", ")})\n`);
  if (skipped.length) {
    process.stdout.write(`\n${skipSummary(skipped)}`);
    if (noSkips) {
      process.stderr.write(`error [tests_skipped]: ${skipped.length} test(s) skipped with T2S_NO_SKIPS=1:\n${skipped.map((s) => `  ${s.name}: ${s.reason}`).join("\n")}\n`);
      status = status || 1;
    }
  }
}
process.exit(status);
