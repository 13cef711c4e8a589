import { test } from "node:test";
import assert from "node:assert/strict";
import { existsSync, readFileSync, writeFileSync, mkdirSync } from "node:fs";
import { join } from "node:path";
import { chromium } from "playwright-core";
import { saveFigure, listFigures, saveTableCsv } from "../../lib/report/store.js";
import { parseFormats, findBrowser } from "../../lib/report/export.js";
import { NotebookReport } from "../../lib/report/notebook-report.js";
import { pass1ByGroupFigure, outcomeHeatmapFigure } from "../../lib/report/figures.js";
import { headlineTable } from "../../lib/report/tables.js";
import { needsChromium, runCli, scratchDir } from "../helpers.js";
import { makeRows } from "./fixtures.js";

const rows = makeRows();

test("the figure store round-trips figures and rejects unsafe names and bad JSON", () => {
  const dir = scratchDir();
  const fig = pass1ByGroupFigure(rows, "difficulty");
  saveFigure(dir, "b-fig", fig);
  saveFigure(dir, "a-fig", outcomeHeatmapFigure(rows, "archetype"));
  assert.deepEqual(listFigures(dir).map((f) => f.name), ["a-fig", "b-fig"]);
  assert.deepEqual(listFigures(dir)[1].figure.data, JSON.parse(JSON.stringify(fig.data)));
  assert.throws(() => saveFigure(dir, "../escape", fig), /must be letters/);
  assert.throws(() => saveTableCsv(dir, "a b", "x"), /must be letters/);
  writeFileSync(join(dir, "figures", "c.json"), "{");
  assert.throws(() => listFigures(dir), /c\.json: not JSON/);
  assert.throws(() => listFigures(join(dir, "nope")), /does not exist/);
});

test("NotebookReport returns values and saves them without a kernel", () => {
  const dir = scratchDir();
  const rep = new NotebookReport({ dir, prefix: "01", inline: false });
  const fig = pass1ByGroupFigure(rows, "difficulty");
  assert.equal(rep.figure("pass1", fig), fig);
  const t = headlineTable(rows);
  assert.equal(rep.table("headline", t), t);
  assert.ok(existsSync(join(dir, "figures", "01-pass1.json")));
  assert.match(readFileSync(join(dir, "tables", "01-headline.csv"), "utf8"), /^model,tasks,rows,k,pass1,pass1_lo/);
  assert.equal(rep.saved.length, 2);
});

test("formats and browser lookup fail with clear messages", () => {
  assert.deepEqual(parseFormats("svg, PNG,svg"), ["svg", "png"]);
  assert.throws(() => parseFormats("svg,gif"), /unknown figure format 'gif'/);
  assert.throws(() => findBrowser("/nonexistent/chromium"), /no Chromium found.*apt-get install chromium/s);
});

test("t2s figures export writes SVG, PNG and PDF files that open", { skip: needsChromium() }, async () => {
  const dir = scratchDir();
  saveFigure(dir, "01-pass1-by-difficulty", pass1ByGroupFigure(rows, "difficulty"));
  saveFigure(dir, "01-outcome-by-archetype", outcomeHeatmapFigure(rows, "archetype"));
  const r = await runCli(["figures", "export", "--report", dir, "--format", "svg,png,pdf", "--json"]);
  assert.equal(r.code, 0, r.stderr);
  const done = JSON.parse(r.stdout) as Array<{ name: string; files: string[] }>;
  assert.deepEqual(done.map((d) => d.name), ["01-outcome-by-archetype", "01-pass1-by-difficulty"]);
  for (const name of done.map((d) => d.name)) {
    const png = readFileSync(join(dir, "figures", `${name}.png`));
    assert.deepEqual([...png.subarray(0, 8)], [0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]);
    assert.equal(readFileSync(join(dir, "figures", `${name}.pdf`)).subarray(0, 5).toString("latin1"), "%PDF-");
    assert.match(readFileSync(join(dir, "figures", `${name}.svg`), "utf8"), /^<svg[^>]*xmlns="http:\/\/www\.w3\.org\/2000\/svg"/);
  }
  // the SVG parses as XML in the browser and holds the plot's bars
  const browser = await chromium.launch({ executablePath: findBrowser(), args: ["--no-sandbox", "--disable-gpu"] });
  try {
    const page = await browser.newPage();
    const svg = readFileSync(join(dir, "figures", "01-pass1-by-difficulty.svg"), "utf8");
    const facts = await page.evaluate(`(() => { const d = new DOMParser().parseFromString(${JSON.stringify(svg)}, "image/svg+xml");
      return { root: d.documentElement.nodeName, errors: d.getElementsByTagName("parsererror").length, bars: d.querySelectorAll(".point").length }; })()`) as { root: string; errors: number; bars: number };
    assert.deepEqual(facts, { root: "svg", errors: 0, bars: 3 });
  } finally {
    await browser.close();
  }
  const list = await runCli(["figures", "list", "--report", dir]);
  assert.match(list.stdout, /01-pass1-by-difficulty/);
});

test("t2s figures export: clear errors for no browser, no figures, bad format", async () => {
  const dir = scratchDir();
  const empty = await runCli(["figures", "export", "--report", dir]);
  assert.notEqual(empty.code, 0);
  assert.match(empty.stderr, /no figures in/);
  mkdirSync(join(dir, "figures"));
  saveFigure(dir, "x", pass1ByGroupFigure(rows, "difficulty"));
  const nob = await runCli(["figures", "export", "--report", dir, "--browser", "/nonexistent/chromium"]);
  assert.notEqual(nob.code, 0);
  assert.match(nob.stderr, /no Chromium found/);
  assert.ok(!existsSync(join(dir, "figures", "x.svg")));
  const bad = await runCli(["figures", "export", "--report", dir, "--format", "jpg"]);
  assert.equal(bad.code, 2);
  assert.match(bad.stderr, /unknown figure format 'jpg'/);
});
