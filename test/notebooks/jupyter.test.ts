// The same notebook through standard Jupyter tooling: the kernelspec registered by `t2s notebooks
// install-kernel` into a temp prefix, executed by Debian's nbclient and validated by nbformat.
import { test } from "node:test";
import assert from "node:assert/strict";
import { existsSync } from "node:fs";
import { join } from "node:path";
import { needsJupyter, repoRoot, runCli, scratchDir } from "../helpers.js";
import { executeWithNbclient, readJson } from "./fixtures.js";

// without Debian's Jupyter packages (scripts/setup-system.sh installs them where it has apt-get and root)
// the test skips with the reason; with T2S_NO_SKIPS=1 (CI) that skip fails the run
test("install-kernel registers tslab in a prefix, and nbclient executes 00-smoke with it", { skip: needsJupyter() }, async () => {
  const prefix = scratchDir("t2s-jupyter-");
  const r = await runCli(["notebooks", "install-kernel", "--prefix", prefix, "--json"]);
  assert.equal(r.code, 0, r.stderr);
  const info = JSON.parse(r.stdout);
  const spec = readJson(join(prefix, "share", "jupyter", "kernels", "tslab", "kernel.json"));
  assert.deepEqual(spec.argv.slice(1), ["kernel", "--config-path", "{connection_file}"]);
  assert.equal(spec.argv[0], info.binary);
  assert.equal(spec.language, "typescript");

  const outFile = join(prefix, "smoke.nbclient.ipynb");
  // the kernel starts in notebooks/, as Jupyter would start it
  const run = executeWithNbclient(join(repoRoot, "notebooks", "00-smoke.ipynb"), join(repoRoot, "notebooks"), outFile, join(prefix, "share", "jupyter"));
  assert.equal(run.status, 0, `nbclient failed:\n${run.stderr}`);
  assert.ok(existsSync(outFile));
  const nb = readJson(outFile);
  const code = nb.cells.filter((c: any) => c.cell_type === "code");
  assert.deepEqual(code.map((c: any) => c.execution_count), [1, 2, 3, 4, 5]);
  const html = JSON.stringify(code.map((c: any) => c.outputs));
  assert.match(html, /t2s-smoke-html/);
  assert.match(html, /Plotly\.newPlot/);
});

test("install-kernel with a Python that lacks Jupyter names the Debian packages to install", async () => {
  const r = await runCli(["notebooks", "install-kernel", "--prefix", scratchDir(), "--python", "/nonexistent/python3"]);
  assert.equal(r.code, 1);
  assert.match(r.stderr, /jupyter_missing/);
  assert.match(r.stderr, /apt-get install jupyter-client python3-ipykernel/);
});
