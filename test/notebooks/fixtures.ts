/** Small notebooks written by the tests themselves. */
import { spawnSync } from "node:child_process";
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import type { Notebook } from "../../lib/notebooks/nbformat.js";
import { plotlyBundleHtml, plotlyFigureHtml } from "../../lib/report/display.js";
import { HANG_GUARD_MS, SYSTEM_PYTHON } from "../helpers.js";

export interface FixtureCell {
  source: string;
  type?: "code" | "markdown";
  tags?: string[];
}

/** Writes an nbformat 4.4 notebook (no cell ids, stale outputs) so the runner's normalising is exercised too; returns its path. */
export function writeNotebook(dir: string, name: string, cells: Array<string | FixtureCell>): string {
  const nb = {
    nbformat: 4,
    nbformat_minor: 4,
    metadata: { kernelspec: { name: "tslab", display_name: "TypeScript", language: "typescript" } },
    cells: cells.map((c) => {
      const cell = typeof c === "string" ? { source: c } : c;
      const metadata = cell.tags ? { tags: cell.tags } : {};
      if (cell.type === "markdown") return { cell_type: "markdown", metadata, source: cell.source };
      return {
        cell_type: "code",
        metadata,
        source: cell.source,
        execution_count: 9,
        outputs: [{ output_type: "stream", name: "stdout", text: "stale output from an earlier run\n" }],
      };
    }),
  };
  const path = join(dir, `${name}.ipynb`);
  writeFileSync(path, JSON.stringify(nb, null, 1));
  return path;
}

/** Parses a written notebook file. */
export function readJson(path: string): any {
  return JSON.parse(readFileSync(path, "utf8"));
}

/** Problems nbformat's own JSON-schema validation (Debian's /usr/bin/python3) finds in a notebook file ("" when valid). */
export function nbformatProblems(path: string): string {
  const r = spawnSync(SYSTEM_PYTHON, ["-c", "import sys, nbformat; nbformat.validate(nbformat.read(sys.argv[1], as_version=nbformat.NO_CONVERT))", path], { encoding: "utf8", timeout: HANG_GUARD_MS });
  if (r.error) return `cannot run ${SYSTEM_PYTHON} (install python3-nbformat): ${r.error.message}`;
  return r.status === 0 ? "" : r.stderr.trim() || `exit ${r.status}`;
}

const NBCLIENT_EXECUTE = `
import sys, nbformat
from nbclient import NotebookClient
nb = nbformat.read(sys.argv[1], as_version=4)
NotebookClient(nb, kernel_name="tslab", timeout=int(sys.argv[4]), startup_timeout=int(sys.argv[4]), resources={"metadata": {"path": sys.argv[2]}}).execute()
nbformat.validate(nb)
nbformat.write(nb, sys.argv[3])
`;

/**
 * Executes a notebook with Debian's nbclient and the tslab kernelspec registered under `jupyterPath`, the
 * kernel started in `cwd` as Jupyter would start it; the executed notebook is validated and written to
 * `output`. The kernel start and each cell get the hang guard (nbclient's own defaults, 60 s to start, are
 * too short for a loaded machine); the whole run gets four of them. Returns the python process's exit
 * status and stderr.
 */
export function executeWithNbclient(input: string, cwd: string, output: string, jupyterPath: string): { status: number | null; stderr: string } {
  const run = spawnSync(SYSTEM_PYTHON, ["-c", NBCLIENT_EXECUTE, input, cwd, output, String(HANG_GUARD_MS / 1000)], {
    encoding: "utf8",
    env: { ...process.env, JUPYTER_PATH: jupyterPath, PYDEVD_DISABLE_FILE_VALIDATION: "1" },
    timeout: 4 * HANG_GUARD_MS,
  });
  return { status: run.status, stderr: run.stderr ?? String(run.error) };
}

/** A notebook as a run leaves it: a table, the inlined bundle, then two figures (3 and 2 bars). */
export function executedReport(): Notebook {
  const html = (s: string) => ({ output_type: "display_data" as const, data: { "text/html": s }, metadata: {} });
  return {
    nbformat: 4,
    nbformat_minor: 5,
    metadata: { t2s: { status: "ok", params: { n: 3 } } },
    cells: [
      { cell_type: "markdown", id: "m", metadata: {}, source: "# Report" },
      {
        cell_type: "code", id: "c1", metadata: {}, source: "report.figure('a', fig)", execution_count: 1,
        outputs: [
          html("<table id='t'><tr><td>0.4231</td></tr></table>"),
          html(plotlyBundleHtml()),
          html(plotlyFigureHtml({ data: [{ type: "bar", x: ["a", "b", "c"], y: [1, 2, 3] }] })),
        ],
      },
      { cell_type: "code", id: "c2", metadata: {}, source: "report.figure('b', fig)", execution_count: 2, outputs: [html(plotlyFigureHtml({ data: [{ type: "bar", x: ["x", "y"], y: [4, 5] }] }))] },
    ],
  };
}
