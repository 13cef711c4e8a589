// A research notebook through standard Jupyter tooling: the kernelspec `t2s notebooks install-kernel`
// registers, executed by Debian's nbclient (the machinery the classic Notebook runs cells with), with the
// kernel started in notebooks/ as Jupyter starts it for a notebook there.
import { test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { readNotebook, serializeNotebook } from "../../lib/notebooks/nbformat.js";
import { injectParameters } from "../../lib/notebooks/params.js";
import { needsJupyter, repoRoot, runCli, scratchDir } from "../helpers.js";
import { executeWithNbclient } from "../notebooks/fixtures.js";
import { makeRows, writeRows } from "../report/fixtures.js";

test("nbclient runs 05-paired-delta with the registered kernel: every cell, no error, figures inline", { skip: needsJupyter() }, async () => {
  const dir = scratchDir("t2s-nb-jupyter-");
  const prefix = join(dir, "prefix");
  const r = await runCli(["notebooks", "install-kernel", "--prefix", prefix]);
  assert.equal(r.code, 0, r.stderr);
  const a = writeRows(join(dir, "a.jsonl"), makeRows({ runs: 2 }));
  const b = writeRows(join(dir, "b.jsonl"), makeRows({ runs: 2, lift: 0.25, seed: 9 }));
  const nb = readNotebook(join(repoRoot, "notebooks", "05-paired-delta.ipynb"));
  injectParameters(nb, { a, b, report_dir: join(dir, "report"), B: 200 }); // 200 bootstrap resamples: enough to draw every figure
  const input = join(dir, "05-in.ipynb");
  const output = join(dir, "05-out.ipynb");
  writeFileSync(input, serializeNotebook(nb));
  const run = executeWithNbclient(input, join(repoRoot, "notebooks"), output, join(prefix, "share", "jupyter"));
  assert.equal(run.status, 0, `nbclient failed:\n${run.stderr.slice(-3000)}`);
  const done = JSON.parse(readFileSync(output, "utf8"));
  const code = done.cells.filter((c: { cell_type: string }) => c.cell_type === "code");
  assert.ok(code.every((c: { execution_count: number | null }) => typeof c.execution_count === "number"), "every code cell ran");
  const outputs = JSON.stringify(code.map((c: { outputs: unknown }) => c.outputs));
  assert.doesNotMatch(outputs, /"output_type":"error"/);
  assert.match(outputs, /Plotly\.newPlot/);
  assert.match(outputs, /moved|no_change_detected|within_eval_noise|moved_the_wrong_way|insufficient_data/);
});
