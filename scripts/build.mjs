// `npm run build` (also run by `npm ci` through "prepare"): compiles lib/ to dist/ with tsc, then writes
// dist/.sources, the signature of the lib/ files it was built from. bin/t2s.js runs dist/ only while that
// signature still matches lib/, so an edited source never runs as stale compiled code.
import { execFileSync } from "node:child_process";
import { rmSync, writeFileSync } from "node:fs";
import { createRequire } from "node:module";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { sourceSignature } from "../bin/dist-check.js";

const root = join(dirname(fileURLToPath(import.meta.url)), "..");
const stamp = join(root, "dist", ".sources");
// taken before compiling, so an edit made during the build leaves dist/ stale rather than wrongly fresh
const signature = sourceSignature(join(root, "lib"));
rmSync(stamp, { force: true });
const tsc = createRequire(join(root, "package.json")).resolve("typescript/bin/tsc");
execFileSync(process.execPath, [tsc, "-p", join(root, "tsconfig.build.json")], { stdio: "inherit", cwd: root });
writeFileSync(stamp, signature);
process.stdout.write(`built dist/ from lib/ (${signature.split("\n").length - 1} files)\n`);
