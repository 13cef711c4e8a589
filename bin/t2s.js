#!/usr/bin/env node
// Entry point of the `t2s` command. Runs the compiled dist/ (`npm run build`, done by `npm ci`) when it
// was built from the lib/ sources as they are now; otherwise loads the TypeScript through tsx, so an
// edited lib/ file is never run as stale compiled code. T2S_NO_DIST=1 always takes the tsx path.
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { distIsFresh } from "./dist-check.js";

const root = join(dirname(fileURLToPath(import.meta.url)), "..");
const dist = join(root, "dist");
let main;
if (process.env.T2S_NO_DIST !== "1" && distIsFresh(join(root, "lib"), dist)) {
  // the pool's workers then run dist/lib/db/worker.js directly (lib/db/spawn.ts)
  process.env.T2S_DIST = dist;
  ({ main } = await import("../dist/lib/cli/main.js"));
} else {
  delete process.env.T2S_DIST;
  const { register } = await import("tsx/esm/api");
  register();
  ({ main } = await import("../lib/cli/main.ts"));
}
process.exitCode = await main(process.argv.slice(2));
