// Scratch folders of a test file are removed when its process exits, unless T2S_KEEP_SCRATCH=1.
import { test } from "node:test";
import assert from "node:assert/strict";
import { existsSync, rmSync } from "node:fs";
import { spawnSync } from "node:child_process";
import { join } from "node:path";
import { repoRoot } from "../helpers.js";

/** Runs a child that makes two scratch folders with a file in each and prints their paths. */
function childFolders(env: Record<string, string>): string[] {
  const script = `import { scratchDir } from ${JSON.stringify(join(repoRoot, "test", "helpers.ts"))};
import { writeFileSync } from "node:fs";
const dirs = [scratchDir(), scratchDir("t2s-scratch-check-")];
for (const d of dirs) writeFileSync(d + "/f.txt", "x");
console.log(JSON.stringify(dirs));`;
  const r = spawnSync(process.execPath, ["--import", "tsx", "--input-type=module", "-e", script], { encoding: "utf8", env: { ...process.env, ...env } });
  assert.equal(r.status, 0, r.stderr);
  return JSON.parse(r.stdout);
}

test("scratch folders are gone once the test file's process exits; T2S_KEEP_SCRATCH=1 keeps them", () => {
  const gone = childFolders({ T2S_KEEP_SCRATCH: "" });
  assert.equal(gone.length, 2);
  for (const d of gone) assert.equal(existsSync(d), false, d);
  const kept = childFolders({ T2S_KEEP_SCRATCH: "1" });
  for (const d of kept) assert.ok(existsSync(join(d, "f.txt")), d);
  for (const d of kept) rmSync(d, { recursive: true, force: true });
});
