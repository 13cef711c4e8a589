// A stored report opened in the classic Jupyter Notebook: signed when stored, it opens trusted and its
// figures draw from the shared plotly.js copy, which the page reaches by a relative URL (/notebooks/<path>
// of a file that is not a notebook redirects to /files/<path>).
import { test } from "node:test";
import assert from "node:assert/strict";
import { spawn, spawnSync } from "node:child_process";
import { createServer } from "node:net";
import { join } from "node:path";
import { storeReport } from "../../lib/notebooks/store.js";
import { HANG_GUARD_MS, needsChromium, scratchDir, SYSTEM_PYTHON } from "../helpers.js";
import { inspectPage } from "./browser.js";
import { executedReport } from "./fixtures.js";

function needsClassicNotebook(): string | false {
  const r = spawnSync(SYSTEM_PYTHON, ["-c", "import notebook.notebookapp"], { encoding: "utf8", timeout: HANG_GUARD_MS });
  if (r.status === 0 && !spawnSync("jupyter-trust", ["--help"]).error) return false;
  return "the classic Jupyter Notebook or jupyter-trust is not installed (apt-get install jupyter-notebook jupyter-nbformat)";
}

function freePort(): Promise<number> {
  return new Promise((resolvePort, reject) => {
    const s = createServer();
    s.on("error", reject);
    s.listen(0, "127.0.0.1", () => {
      const port = (s.address() as { port: number }).port;
      s.close(() => resolvePort(port));
    });
  });
}

const skip = needsChromium() || needsClassicNotebook();

test("the classic Notebook opens a stored report trusted, and its figures draw from the shared plotly.js", { skip }, async () => {
  const root = scratchDir("t2s-classic-");
  const jupyter = { JUPYTER_DATA_DIR: join(root, ".data"), JUPYTER_CONFIG_DIR: join(root, ".config"), JUPYTER_RUNTIME_DIR: join(root, ".runtime") };
  const before = process.env.JUPYTER_DATA_DIR;
  process.env.JUPYTER_DATA_DIR = jupyter.JUPYTER_DATA_DIR; // the signature goes where this server looks for it
  try {
    const stored = storeReport(executedReport(), { dir: join(root, "reports", "round1", "notebooks"), name: "05", assetsDir: join(root, "reports", "assets") });
    assert.equal(stored.trust.signed, true, stored.trust.reason);
  } finally {
    if (before === undefined) delete process.env.JUPYTER_DATA_DIR;
    else process.env.JUPYTER_DATA_DIR = before;
  }
  const port = await freePort();
  const token = "t2s-test";
  const server = spawn(SYSTEM_PYTHON, ["-m", "notebook", "--allow-root", "--no-browser", "--ip=127.0.0.1", `--port=${port}`, `--NotebookApp.token=${token}`, `--notebook-dir=${root}`], {
    env: { ...process.env, ...jupyter },
    stdio: ["ignore", "ignore", "pipe"],
  });
  let log = "";
  server.stderr.on("data", (d) => (log += d));
  try {
    const base = `http://127.0.0.1:${port}`;
    const deadline = Date.now() + HANG_GUARD_MS;
    for (;;) {
      const up = await fetch(`${base}/api/status?token=${token}`).then((r) => r.ok, () => false);
      if (up) break;
      assert.ok(Date.now() < deadline && server.exitCode === null, `the notebook server did not start:\n${log.slice(-2000)}`);
      await new Promise((r) => setTimeout(r, 250));
    }
    const facts = await inspectPage(`${base}/notebooks/reports/round1/notebooks/05.ipynb?token=${token}`, /^(http:\/\/127\.0\.0\.1:\d+\/|data:|about:)/);
    assert.equal(facts.trusted, true);
    assert.deepEqual([facts.figures, facts.bars], [2, 5]);
    assert.deepEqual(facts.errors, []);
  } finally {
    server.kill("SIGTERM");
  }
});
