/**
 * `t2s notebooks run --out X` puts everything of the report in X: the executed notebook, its HTML, and
 * the figures and tables the notebook saves (its `report_dir`); `t2s figures list|export` then find them
 * there, and both say `no_figures` alike for a folder without any.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { runCli, scratchDir } from "../helpers.js";
import { writeNotebook } from "../notebooks/fixtures.js";

test("notebooks run --out X saves the notebook's figures and tables in X, where figures list finds them", async () => {
  const dir = scratchDir();
  const out = join(dir, "report");
  const name = `out-test-${process.pid}`;
  const path = writeNotebook(dir, "saves", [
    { source: "let report_dir = \"reports\";", tags: ["parameters"] },
    `import { saveFigure, saveTableCsv } from "./lib/report/store.js";\nsaveFigure(report_dir, "${name}", { data: [{ type: "bar", x: ["a"], y: [1] }] });\nsaveTableCsv(report_dir, "${name}", "a,b\\n1,2\\n");`,
  ]);
  const r = await runCli(["notebooks", "run", path, "--out", out]);
  assert.equal(r.code, 0, r.stderr);
  assert.ok(existsSync(join(out, "saves.ipynb")) && existsSync(join(out, "saves.html")));
  assert.ok(existsSync(join(out, "figures", `${name}.json`)), "the figure is in the --out folder");
  assert.equal(readFileSync(join(out, "tables", `${name}.csv`), "utf8"), "a,b\n1,2\n");
  assert.ok(!existsSync(join("reports", "figures", `${name}.json`)), "nothing went to the kit's reports/");
  const list = await runCli(["figures", "list", "--report", out]);
  assert.equal(list.code, 0, list.stderr);
  assert.match(list.stdout, new RegExp(`^${name}  \\(1 traces\\)`));
  // an explicit --param report_dir still wins
  const elsewhere = join(dir, "elsewhere");
  const again = await runCli(["notebooks", "run", path, "--out", out, "--param", `report_dir=${elsewhere}`]);
  assert.equal(again.code, 0, again.stderr);
  assert.ok(existsSync(join(elsewhere, "figures", `${name}.json`)));
});

test("figures list on a report folder without figures is the same no_figures error as figures export", async () => {
  const dir = scratchDir();
  const list = await runCli(["figures", "list", "--report", dir]);
  const exported = await runCli(["figures", "export", "--report", dir]);
  for (const r of [list, exported]) {
    assert.equal(r.code, 1);
    assert.equal(r.stdout, "");
    assert.match(r.stderr, /^error \[no_figures\]: no figures in .*figures \(notebooks save them there when run with 't2s notebooks run --out .*'/);
  }
  assert.equal(list.stderr, exported.stderr);
  const json = await runCli(["figures", "list", "--report", dir, "--json"]);
  assert.equal(json.code, 1);
  assert.match(json.stderr, /^error \[no_figures\]/);
});
