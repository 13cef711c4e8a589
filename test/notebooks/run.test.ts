// Runs real notebooks on a real tslab kernel through the `t2s` command (a few seconds per kernel start).
import { test } from "node:test";
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { existsSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { validateNotebook } from "../../lib/notebooks/nbformat.js";
import { trustedByJupyter } from "../../lib/notebooks/trust.js";
import { plotlySource } from "../../lib/report/display.js";
import { HANG_GUARD_MS, needsChromium, needsJupyter, runCli, scratchDir, type CliResult } from "../helpers.js";
import { inspectReport } from "./browser.js";
import { nbformatProblems, readJson, writeNotebook } from "./fixtures.js";

const out = scratchDir("t2s-nb-out-");
const PLOTLY_ASSET = `plotly-${/plotly\.js v(\d+\.\d+\.\d+)/.exec(plotlySource().slice(0, 500))?.[1]}.min.js`;
/** Notebooks the runner wrote, for nbformat's own schema check at the end. */
const written: string[] = [];
const src = (c: { source: string | string[] }) => (Array.isArray(c.source) ? c.source.join("") : c.source);
const texts = (c: { outputs?: Array<Record<string, any>> }) =>
  (c.outputs ?? []).map((o) => (o.output_type === "stream" ? String(o.text) : JSON.stringify(o.data ?? o.traceback ?? ""))).join("");

/** The user's Jupyter data folder for the 00-smoke run (notebook_secret and nbsignatures.db land here). */
const jupyterData = scratchDir("t2s-jupyter-data-");
let smoke: Promise<CliResult> | undefined;
/** The one 00-smoke run of this file (a kernel start and its cells): the tests below assert on what it left. */
function smokeRun(): Promise<CliResult> {
  smoke ??= runCli(["notebooks", "run", "00-smoke", "--out", out], { timeoutMs: HANG_GUARD_MS, env: { JUPYTER_DATA_DIR: jupyterData } });
  return smoke;
}

const hasTrust = !spawnSync("jupyter-trust", ["--help"]).error && trustedByJupyter("/nonexistent.ipynb") !== null;

test("00-smoke runs; the executed notebook and the HTML hold the HTML output and one plotly figure, plotly.js in <out>/assets", async () => {
  const r = await smokeRun();
  assert.equal(r.code, 0, r.stderr);
  assert.match(r.stdout, /ok\s+00-smoke\s+5\/5 code cells/);
  assert.match(r.stderr, /00-smoke: cell 6\/6 ok/, "progress on stderr");
  const nb = readJson(join(out, "00-smoke.ipynb"));
  assert.deepEqual(validateNotebook(nb), []);
  assert.equal(nb.nbformat_minor, 5);
  assert.equal(nb.metadata.kernelspec.name, "tslab");
  assert.equal(nb.metadata.language_info.name, "typescript");
  const code = nb.cells.filter((c: any) => c.cell_type === "code");
  assert.deepEqual(code.map((c: any) => c.execution_count), [1, 2, 3, 4, 5]);
  assert.match(texts(code[1]), /t2s-lab \d+\.\d+\.\d+ on Node v20/, "a lib module was imported");
  assert.match(texts(code[2]), /awaited 42/, "top-level await");
  const html = code[3].outputs.find((o: any) => o.output_type === "display_data");
  assert.match(html.data["text/html"], /<div id="t2s-smoke-html"><strong>t2s-lab smoke test<\/strong>/);
  const rich = code[4].outputs.map((o: any) => String(o.data?.["text/html"] ?? ""));
  // the kernel inlined plotly.js; the stored notebook loads the one shared copy instead
  assert.deepEqual(rich.filter((h: string) => h.includes("<script") && !h.includes("Plotly.newPlot")), [`<script type="text/javascript" src="assets/${PLOTLY_ASSET}" data-t2s-plotly="shared"></script>`]);
  assert.equal(readFileSync(join(out, "assets", PLOTLY_ASSET), "utf8"), plotlySource());
  const figure = rich.find((h: string) => h.includes("Plotly.newPlot"));
  assert.match(figure, /"type":"bar","x":\["bar 1","bar 2","bar 3"\]/);

  const page = readFileSync(join(out, "00-smoke.html"), "utf8");
  assert.match(page, /t2s-smoke-html/);
  assert.doesNotMatch(page + readFileSync(join(out, "00-smoke.ipynb"), "utf8"), /plotly\.js v\d/, "no copy of plotly.js in the report");
  assert.ok(page.indexOf(`src="assets/${PLOTLY_ASSET}"`) > 0 && page.indexOf(`src="assets/${PLOTLY_ASSET}"`) < page.indexOf("Plotly.newPlot(el"), "plotly.js loads before the figure");
  assert.equal(page.match(/<script[^>]+src=/g)?.length, 1, "the shared copy is the only file the page loads");
});

test("the 00-smoke figure draws from the shared plotly.js, offline", { skip: needsChromium() }, async () => {
  assert.equal((await smokeRun()).code, 0);
  const drawn = await inspectReport(join(out, "00-smoke.html"));
  assert.deepEqual(drawn, { figures: 1, bars: 3, errors: [] });
});

// The runner signs executed notebooks for the user's Jupyter, so their figures show on open.
test("an executed notebook is trusted by the user's Jupyter (nbformat's own check)", { skip: hasTrust ? false : "jupyter-trust / python3-nbformat not installed (npm run setup:system)" }, async () => {
  const r = await smokeRun();
  assert.equal(r.code, 0, r.stderr);
  assert.match(r.stderr, /00-smoke: signed for Jupyter/);
  const nb = join(out, "00-smoke.ipynb");
  process.env.JUPYTER_DATA_DIR = jupyterData;
  try {
    assert.equal(trustedByJupyter(nb), true);
    assert.ok(existsSync(join(jupyterData, "nbsignatures.db")) && existsSync(join(jupyterData, "notebook_secret")));
    // a changed output is a different notebook: no longer trusted
    const edited = join(scratchDir(), "edited.ipynb");
    writeFileSync(edited, readFileSync(nb, "utf8").replace("t2s-lab smoke test", "t2s-lab smoke text"));
    assert.equal(trustedByJupyter(edited), false);
  } finally {
    delete process.env.JUPYTER_DATA_DIR;
  }
});

test("a type error in cell 2 stops the run: exit 1 naming cell 2, later cells not run", async () => {
  const dir = scratchDir();
  const path = writeNotebook(dir, "broken", [
    "const ok: number = 1;\nconsole.log('first', ok);",
    "const x: number = \"oops\";",
    { source: "## after", type: "markdown" },
    "console.log('never');",
  ]);
  const r = await runCli(["notebooks", "run", path, "--out", out], { timeoutMs: HANG_GUARD_MS });
  assert.equal(r.code, 1);
  assert.match(r.stderr, /notebook broken failed at cell 2 \(id [\w-]+\): TypeScriptError: Type 'string' is not assignable to type 'number'/);
  assert.match(r.stderr, /1:7 - Type 'string'/, "traceback shown");
  assert.match(r.stdout, /FAILED broken\s+2\/3 code cells/);
  const nb = readJson(join(out, "broken.ipynb"));
  assert.deepEqual(validateNotebook(nb), []);
  written.push(join(out, "broken.ipynb"));
  const [c1, c2, , c4] = nb.cells;
  assert.equal(c1.execution_count, 1);
  assert.match(texts(c1), /first 1/);
  assert.equal(c2.execution_count, 2);
  assert.deepEqual(c2.outputs.map((o: any) => [o.output_type, o.ename]), [["error", "TypeScriptError"]]);
  assert.equal(c4.execution_count, null, "stale count cleared, cell not reported as run");
  assert.deepEqual(c4.outputs, []);
  assert.equal(nb.metadata.t2s.status, "failed");
  assert.equal(nb.metadata.t2s.failed_cell, 2);
  assert.match(readFileSync(join(out, "broken.html"), "utf8"), /failed at cell 2/);
});

test("--param values override the parameters cell and reach T2S_PARAMS; display ids update in place; empty cells are skipped", async () => {
  const dir = scratchDir();
  const path = writeNotebook(dir, "params", [
    { source: "let n: number = 1;\nlet label = \"default\";", tags: ["parameters"] },
    "console.log(JSON.stringify({ n: n, label: label, typeofN: typeof n, env: JSON.parse(process.env.T2S_PARAMS ?? 'null') }));",
    "import * as tslab from \"tslab\";\nconst bar = tslab.newDisplay();\nbar.html(\"<i>0%</i>\");",
    "bar.html(\"<i>100%</i>\");",
    "  \n",
  ]);
  const r = await runCli(["notebooks", "run", path, "--out", out, "--param", "n=5", "--param", "label=hello world", "--json"], { timeoutMs: HANG_GUARD_MS });
  assert.equal(r.code, 0, r.stderr);
  const result = JSON.parse(r.stdout)[0];
  assert.equal(result.ok, true);
  assert.equal(result.codeCells, 6);
  assert.equal(result.executed, 5, "an empty cell is not executed");
  const nb = readJson(result.ipynb);
  assert.deepEqual(validateNotebook(nb), []);
  written.push(result.ipynb);
  const injected = nb.cells[1];
  assert.deepEqual(injected.metadata.tags, ["injected-parameters"]);
  assert.match(src(injected), /let n = 5;\nlet label = "hello world";/);
  const printed = JSON.parse(texts(nb.cells[2]));
  assert.deepEqual(printed, { n: 5, label: "hello world", typeofN: "number", env: { n: 5, label: "hello world" } });
  assert.deepEqual(nb.cells[3].outputs.map((o: any) => o.data["text/html"]), ["<i>100%</i>"], "updated in place");
  assert.deepEqual(nb.cells[4].outputs, []);
  assert.equal(nb.cells[5].execution_count, null);
  assert.deepEqual(nb.metadata.t2s.params, { n: 5, label: "hello world" });
});

test("a cell over --timeout-ms is interrupted, a kernel that exits is reported; each run ends cleanly", async () => {
  const dir = scratchDir();
  // the 1000 ms limit applies to the cell that never ends only: a quick cell may take longer than that on a
  // loaded machine (each cell is compiled first), so the kernel that dies runs under the default limit
  const slow = writeNotebook(dir, "slow", ["await new Promise((r) => setTimeout(r, 120000));", "console.log('never')"]);
  const dies = writeNotebook(dir, "dies", ["console.log('before');", "process.exit(3);", "console.log('never')"]);
  const timedOut = await runCli(["notebooks", "run", slow, "--out", out, "--timeout-ms", "1000", "--json"], { timeoutMs: HANG_GUARD_MS });
  assert.equal(timedOut.code, 1);
  assert.match(timedOut.stderr, /notebook slow failed at cell 1 .*CellTimeoutError: the cell did not finish within 1000 ms/);
  const died = await runCli(["notebooks", "run", dies, "--out", out, "--json"], { timeoutMs: HANG_GUARD_MS });
  assert.equal(died.code, 1);
  assert.match(died.stderr, /notebook dies failed at cell 2 .*KernelDied: the kernel process ended \(exit code 3\)/);
  const results = [...JSON.parse(timedOut.stdout), ...JSON.parse(died.stdout)];
  assert.deepEqual(results.map((x: any) => [x.name, x.ok, x.executed]), [["slow", false, 1], ["dies", false, 2]]);
  const nb = readJson(join(out, "slow.ipynb"));
  assert.equal(nb.cells[1].execution_count, null);
  const diedNb = readJson(join(out, "dies.ipynb"));
  assert.equal(diedNb.cells[1].outputs[0].ename, "KernelDied");
  assert.equal(diedNb.cells[2].execution_count, null);
});

test("bad names and flags: unknown notebook exits 1 listing known ones, a malformed --param exits 2", async () => {
  const missing = await runCli(["notebooks", "run", "no-such-notebook", "--out", out]);
  assert.equal(missing.code, 1);
  assert.match(missing.stderr, /notebook_not_found.*no notebook 'no-such-notebook'.*known: .*00-smoke/s);
  const bad = await runCli(["notebooks", "run", "00-smoke", "--param", "oops", "--out", out]);
  assert.equal(bad.code, 2);
  assert.match(bad.stderr, /--param must look like name=value/);
  assert.equal(existsSync(join(out, "oops.ipynb")), false);
  const list = await runCli(["notebooks", "list", "--json"]);
  assert.equal(list.code, 0);
  assert.ok(JSON.parse(list.stdout).some((n: { name: string }) => n.name === "00-smoke"));
});

test("nbformat's own schema accepts the notebooks the runner wrote, failed ones included", { skip: needsJupyter() }, () => {
  assert.ok(written.length >= 2, `the runs above wrote ${written.length} notebooks`);
  for (const path of written) assert.equal(nbformatProblems(path), "", path);
});
