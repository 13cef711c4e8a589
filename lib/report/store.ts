/**
 * The report folder's figure store: notebooks save each figure as plain Plotly JSON
 * `<report>/figures/<name>.json` ({data, layout, config?}), and `t2s figures export` renders every file
 * there to SVG/PNG/PDF beside it. Tables go to `<report>/tables/<name>.csv`.
 */
import { existsSync, mkdirSync, readdirSync, readFileSync } from "node:fs";
import { writeFileAtomic } from "../core/files.js";
import { join } from "node:path";
import { T2sError } from "../core/errors.js";
import type { PlotlyFigure } from "./display.js";

export const FIGURES_DIR = "figures";
export const TABLES_DIR = "tables";

const NAME = /^[A-Za-z0-9][A-Za-z0-9._-]*$/;

/** Throws a UsageError-style T2sError unless `name` is a safe file stem (letters, digits, . _ -). */
export function checkName(name: string): void {
  if (!NAME.test(name) || name.length > 120) throw new T2sError("bad_name", `figure/table name '${name}' must be letters, digits, '.', '_' or '-' (at most 120 characters)`);
}

/** Writes `fig` as `<dir>/figures/<name>.json` (replacing an earlier one) and returns the path. */
export function saveFigure(dir: string, name: string, fig: PlotlyFigure): string {
  checkName(name);
  const folder = join(dir, FIGURES_DIR);
  mkdirSync(folder, { recursive: true });
  const path = join(folder, `${name}.json`);
  writeFileAtomic(path, JSON.stringify({ data: fig.data, layout: fig.layout ?? {}, ...(fig.config ? { config: fig.config } : {}) }));
  return path;
}

/** Writes CSV text as `<dir>/tables/<name>.csv` and returns the path. */
export function saveTableCsv(dir: string, name: string, csv: string): string {
  checkName(name);
  const folder = join(dir, TABLES_DIR);
  mkdirSync(folder, { recursive: true });
  const path = join(folder, `${name}.csv`);
  writeFileAtomic(path, csv);
  return path;
}

export interface SavedFigure {
  name: string;
  path: string;
  figure: PlotlyFigure;
}

/** The error for a report folder without figures (`t2s figures list` and `export` alike). */
export function noFiguresError(dir: string): T2sError {
  return new T2sError("no_figures", `no figures in ${join(dir, FIGURES_DIR)} (notebooks save them there when run with 't2s notebooks run --out ${dir}', or with report_dir set to it)`);
}

/** Returns the figures saved in a report folder, sorted by name; throws naming the file for bad JSON. */
export function listFigures(dir: string): SavedFigure[] {
  if (!existsSync(dir)) throw new T2sError("not_found", `report folder ${dir} does not exist`);
  const folder = join(dir, FIGURES_DIR);
  if (!existsSync(folder)) return [];
  return readdirSync(folder).filter((f) => f.endsWith(".json")).sort().map((f) => {
    const path = join(folder, f);
    let figure: PlotlyFigure;
    try {
      figure = JSON.parse(readFileSync(path, "utf8")) as PlotlyFigure;
    } catch (e) {
      throw new T2sError("bad_figure", `${path}: not JSON (${(e as Error).message})`);
    }
    if (!figure || !Array.isArray(figure.data)) throw new T2sError("bad_figure", `${path}: a figure needs a "data" list of traces`);
    return { name: f.slice(0, -5), path, figure };
  });
}
