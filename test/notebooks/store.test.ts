// A stored report loads plotly.js from one shared file instead of carrying its own 4.8 MB copy, and still
// draws its figures offline. Synthetic notebooks stand in for executed ones: storing needs no kernel.
import { test } from "node:test";
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { existsSync, mkdirSync, readdirSync, readFileSync, statSync, writeFileSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { isT2sError } from "../../lib/core/errors.js";
import { serializeNotebook, validateNotebook, type Notebook } from "../../lib/notebooks/nbformat.js";
import { countInlinedPlotly, INLINE_PLOTLY_OPEN, inlinedPlotly, sharePlotly, slimStoredReport, storeReport } from "../../lib/notebooks/store.js";
import { trustedByJupyter } from "../../lib/notebooks/trust.js";
import { plotlyBundleHtml, plotlyFigureHtml, plotlySource } from "../../lib/report/display.js";
import { needsChromium, repoRoot, runCli, scratchDir } from "../helpers.js";
import { inspectReport } from "./browser.js";
import { executedReport } from "./fixtures.js";

// storing signs notebooks for the user's Jupyter: here a scratch Jupyter data folder stands in for the user's
process.env.JUPYTER_DATA_DIR = scratchDir("t2s-jupyter-data-");
const hasTrust = !spawnSync("jupyter-trust", ["--help"]).error && trustedByJupyter("/nonexistent.ipynb") !== null;

const VERSION = /plotly\.js v(\d+\.\d+\.\d+)/.exec(plotlySource().slice(0, 500))?.[1] ?? "";
const ASSET = `plotly-${VERSION}.min.js`;

const htmlOutputs = (nb: Notebook) => nb.cells.flatMap((c) => (c.cell_type === "code" ? c.outputs : [])).map((o) => String((o as { data?: Record<string, unknown> }).data?.["text/html"] ?? ""));

test("the bundle plotlyBundleHtml inlines is what storing recognises, and only that", () => {
  const bundle = plotlyBundleHtml();
  assert.ok(bundle.startsWith(INLINE_PLOTLY_OPEN));
  assert.equal(inlinedPlotly(bundle), plotlySource(), "the source as it ran, byte for byte");
  assert.equal(inlinedPlotly(bundle + "<b>more</b>"), null);
  assert.equal(inlinedPlotly(bundle.replace("\n</script>", "\n</script><script>x()\n</script>")), null, "a bundle with other scripts after it is left alone");
  assert.equal(inlinedPlotly(plotlyFigureHtml({ data: [] })), null);
});

test("a stored report holds no plotly.js source: one <script src> to the shared file, which is plotly itself", () => {
  const root = scratchDir("t2s-store-");
  const dir = join(root, "round", "notebooks");
  const stored = storeReport(executedReport(), { dir, name: "05-x", assetsDir: join(root, "assets") });
  assert.equal(stored.inlineReason, "");
  assert.deepEqual(stored.plotly.assets, [join(root, "assets", ASSET)]);
  assert.equal(readFileSync(stored.plotly.assets[0], "utf8"), plotlySource());

  const ipynb = readFileSync(stored.ipynb, "utf8");
  const page = readFileSync(stored.html, "utf8");
  for (const text of [ipynb, page]) {
    assert.ok(text.length < 20_000, `a few kB, not megabytes (${text.length} chars)`);
    assert.doesNotMatch(text, /plotly\.js v\d|inlined by t2s-lab/);
  }
  const nb = JSON.parse(ipynb) as Notebook;
  assert.deepEqual(validateNotebook(nb), []);
  const outs = htmlOutputs(nb);
  assert.equal(outs[1], `<script type="text/javascript" src="../../assets/${ASSET}" data-t2s-plotly="shared"></script>`);
  assert.match(outs[0], /0\.4231/, "other outputs unchanged");
  assert.equal(outs.filter((h) => h.includes("Plotly.newPlot")).length, 2);
  assert.ok(page.indexOf(`src="../../assets/${ASSET}"`) < page.indexOf("Plotly.newPlot(el"), "the page loads plotly.js before the first figure");
});

test("reports stored with the same assets folder share one copy; by default it is assets/ inside the report folder", () => {
  const root = scratchDir("t2s-store-");
  const shared = join(root, "assets");
  const a = storeReport(executedReport(), { dir: join(root, "round1", "notebooks"), name: "05", assetsDir: shared });
  const b = storeReport(executedReport(), { dir: join(root, "round2", "notebooks"), name: "05", assetsDir: shared });
  assert.deepEqual(a.plotly.assets, b.plotly.assets);
  const own = storeReport(executedReport(), { dir: join(root, "elsewhere"), name: "05" });
  assert.deepEqual(own.plotly.assets, [join(root, "elsewhere", "assets", ASSET)]);
  assert.match(htmlOutputs(JSON.parse(readFileSync(own.ipynb, "utf8")))[1], new RegExp(`src="assets/${ASSET.replace(/\./g, "\\.")}"`));
});

test("a shared file with other content is never overwritten: a run keeps plotly.js inline and says why", () => {
  const root = scratchDir("t2s-store-");
  mkdirSync(join(root, "assets"));
  writeFileSync(join(root, "assets", ASSET), "not plotly");
  const stored = storeReport(executedReport(), { dir: root, name: "nb" });
  assert.match(stored.inlineReason, /exists with other content/);
  assert.equal(readFileSync(join(root, "assets", ASSET), "utf8"), "not plotly");
  assert.equal(countInlinedPlotly(JSON.parse(readFileSync(stored.ipynb, "utf8"))), 1, "the report keeps its figures");
  assert.throws(() => sharePlotly(executedReport(), { notebookDir: root, assetsDir: join(root, "assets") }), (e) => isT2sError(e, "asset_conflict"));
});

test("t2s notebooks slim converts a stored report in place: same outputs but the bundle, still valid; a slim one is left alone", async () => {
  const root = scratchDir("t2s-slim-");
  const dir = join(root, "r", "notebooks");
  mkdirSync(dir, { recursive: true });
  const before = executedReport();
  writeFileSync(join(dir, "05.ipynb"), serializeNotebook(before));
  writeFileSync(join(dir, "04.ipynb"), serializeNotebook({ ...before, cells: [before.cells[0]] }));
  const r = await runCli(["notebooks", "slim", dir, "--assets", join(root, "assets"), "--json"]);
  assert.equal(r.code, 0, r.stderr);
  const results = JSON.parse(r.stdout) as Array<{ ipynb: string; changed: boolean }>;
  assert.deepEqual(results.map((x) => [x.ipynb.replace(/^.*\//, ""), x.changed]), [["04.ipynb", false], ["05.ipynb", true]]);
  assert.ok(!existsSync(join(dir, "04.html")), "an unchanged notebook is not rewritten");
  const after = JSON.parse(readFileSync(join(dir, "05.ipynb"), "utf8")) as Notebook;
  assert.deepEqual(validateNotebook(after), []);
  const [b, a] = [htmlOutputs(before), htmlOutputs(after)];
  assert.deepEqual(a.filter((_, i) => i !== 1), b.filter((_, i) => i !== 1), "every other output as it was");
  assert.deepEqual({ ...after, cells: [] }, { ...before, cells: [] }, "metadata as it was");
  assert.ok(statSync(join(dir, "05.html")).size < 20_000);
  if (hasTrust) assert.equal(trustedByJupyter(join(dir, "05.ipynb")), true, "the rewritten notebook is signed again, so it opens trusted");
  const again = slimStoredReport(join(dir, "05.ipynb"), { assetsDir: join(root, "assets") });
  assert.equal(again.changed, false);

  const bad = await runCli(["notebooks", "slim", join(root, "missing")]);
  assert.equal(bad.code, 1);
  assert.match(bad.stderr, /^error \[not_found\]: .*missing: no such file or folder/);
});

test("the stored HTML draws every figure offline from the shared file (file://, no network)", { skip: needsChromium() }, async () => {
  const root = scratchDir("t2s-store-");
  const stored = storeReport(executedReport(), { dir: join(root, "round", "notebooks"), name: "05", assetsDir: join(root, "assets") });
  assert.deepEqual(await inspectReport(stored.html), { figures: 2, bars: 5, errors: [] });
});

test("the kit's stored round reports carry no copy of plotly.js: each loads the one in reports/assets", () => {
  const reports = join(repoRoot, "reports");
  const rounds = readdirSync(reports).filter((d) => existsSync(join(reports, d, "notebooks")));
  const files = rounds.flatMap((d) => readdirSync(join(reports, d, "notebooks")).filter((f) => /\.(ipynb|html)$/.test(f)).map((f) => join(reports, d, "notebooks", f)));
  assert.ok(rounds.length >= 2 && files.length >= 4, `round reports found: ${files.join(", ")}`);
  let references = 0;
  for (const file of files) {
    const text = readFileSync(file, "utf8");
    assert.doesNotMatch(text, /inlined by t2s-lab|plotly\.js v\d/, file);
    // in the .ipynb the quotes are JSON-escaped
    for (const m of text.matchAll(/src=\\?"([^"\\]+)\\?" data-t2s-plotly/g)) {
      const asset = resolve(dirname(file), m[1]);
      assert.equal(dirname(asset), join(reports, "assets"), file);
      assert.match(readFileSync(asset, "utf8").slice(0, 200), /plotly\.js v\d/);
      references += 1;
    }
  }
  assert.ok(references >= 4, "the paired-delta reports (.ipynb and .html) show figures");
});
