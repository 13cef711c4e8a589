#!/usr/bin/env node
// Runs every test/**/*.test.ts file (or the paths given) with node's built-in test runner through tsx.
// Node 20's --test does not expand globs or find .ts files itself, so the list is built here.
import { readdirSync, statSync } from "node:fs";
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

const args = process.argv.slice(2);
const files = args.length ? args.flatMap((a) => (statSync(a).isDirectory() ? findTests(a) : [a])) : findTests("test");
const result = spawnSync(process.execPath, ["--import", "tsx", "--test", "--test-reporter=spec", ...files], {
  stdio: "inherit",
  env: { ...process.env, T2S_TEST: "1" },
});
process.exit(result.status ?? 1);
