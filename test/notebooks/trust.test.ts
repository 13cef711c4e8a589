// The runner signs executed notebooks for the user's Jupyter, so their figures show on open.
import { test } from "node:test";
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { existsSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { HANG_GUARD_MS, runCli, scratchDir } from "../helpers.js";
import { signForJupyter, trustedByJupyter } from "../../lib/notebooks/trust.js";

const hasTrust = !spawnSync("jupyter-trust", ["--help"]).error && trustedByJupyter("/nonexistent.ipynb") !== null;

test("an executed notebook is trusted by the user's Jupyter (nbformat's own check)", { skip: hasTrust ? false : "jupyter-trust / python3-nbformat not installed (npm run setup:system)" }, async () => {
  const dataDir = scratchDir("t2s-jupyter-data-"); // the user's Jupyter data folder: notebook_secret + nbsignatures.db
  const out = scratchDir("t2s-trust-out-");
  const r = await runCli(["notebooks", "run", "00-smoke", "--out", out], { timeoutMs: HANG_GUARD_MS, env: { JUPYTER_DATA_DIR: dataDir } });
  assert.equal(r.code, 0, r.stderr);
  assert.match(r.stderr, /00-smoke: signed for Jupyter/);
  const nb = join(out, "00-smoke.ipynb");
  process.env.JUPYTER_DATA_DIR = dataDir;
  try {
    assert.equal(trustedByJupyter(nb), true);
    assert.ok(existsSync(join(dataDir, "nbsignatures.db")) && existsSync(join(dataDir, "notebook_secret")));
    // a changed output is a different notebook: no longer trusted
    const edited = join(out, "edited.ipynb");
    const { readFileSync } = await import("node:fs");
    writeFileSync(edited, readFileSync(nb, "utf8").replace("t2s-lab smoke test", "t2s-lab smoke text"));
    assert.equal(trustedByJupyter(edited), false);
  } finally {
    delete process.env.JUPYTER_DATA_DIR;
  }
});

test("without jupyter-trust the run still succeeds and says how to trust the notebook", () => {
  const before = process.env.T2S_JUPYTER_TRUST;
  process.env.T2S_JUPYTER_TRUST = "/no/such/jupyter-trust";
  try {
    const r = signForJupyter(join(scratchDir(), "x.ipynb"));
    assert.equal(r.signed, false);
    assert.match(r.reason, /not found.*jupyter trust .*jupyter-nbformat/);
  } finally {
    if (before === undefined) delete process.env.T2S_JUPYTER_TRUST;
    else process.env.T2S_JUPYTER_TRUST = before;
  }
});
