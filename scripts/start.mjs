#!/usr/bin/env node
// `npm start`: the demo on the embedded default. Each step is a `t2s` command; steps whose inputs are
// already present are skipped by the commands themselves.
import { spawnSync } from "node:child_process";

const steps = [["info"]];

for (const args of steps) {
  process.stderr.write(`\n$ t2s ${args.join(" ")}\n`);
  const r = spawnSync(process.execPath, ["bin/t2s.js", ...args], { stdio: "inherit" });
  if (r.status !== 0) {
    process.stderr.write(`npm start: step 't2s ${args.join(" ")}' failed (exit ${r.status})\n`);
    process.exit(r.status ?? 1);
  }
}
