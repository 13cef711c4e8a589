/**
 * Storing an executed notebook as a report: the .ipynb, its HTML page, and one shared copy of plotly.js.
 *
 * In a live kernel `plotly()` (lib/report/display.ts) inlines all of plotly.js (about 4.8 MB) once per
 * session, so figures draw with nothing beside the notebook. Stored as is, every report would carry that
 * copy twice (.ipynb and .html). So when a report is stored, each inlined bundle output becomes a
 * `<script src>` with a relative URL to `<assets>/plotly-<version>.min.js`, written once and shared by
 * every report that points there. Relative, because the report then opens wherever it travels together
 * with that folder: in a browser from file:// (a parser-inserted script loads before the figure scripts
 * after it), and in the classic Jupyter Notebook, whose /notebooks/<path> route redirects a file that is
 * not a notebook to /files/<path>, and whose output area loads a script's src synchronously, in order.
 */
import { existsSync, mkdirSync, readdirSync, readFileSync, statSync } from "node:fs";
import { createHash } from "node:crypto";
import { basename, dirname, join, relative, resolve, sep } from "node:path";
import { T2sError } from "../core/errors.js";
import { writeFileAtomic } from "../core/files.js";
import { renderNotebookHtml } from "./html.js";
import { joinSource, readNotebook, serializeNotebook, type DisplayDataOutput, type ExecuteResultOutput, type MultilineString, type Notebook } from "./nbformat.js";
import { signForJupyter, type TrustResult } from "./trust.js";

/**
 * How plotlyBundleHtml (lib/report/display.ts) opens and closes the inlined bundle; written out here since
 * lib/notebooks does not import lib/report (test/notebooks/store.test.ts holds the two together).
 */
export const INLINE_PLOTLY_OPEN = '<script type="text/javascript">/* plotly.js-dist-min, inlined by t2s-lab */\n';
const INLINE_PLOTLY_CLOSE = "\n</script>";

/** The attribute that marks a reference to the shared copy, telling it from the scripts of the figures. */
export const SHARED_PLOTLY_ATTR = "data-t2s-plotly";

/** The folder of the shared copy when none is named: `assets/` inside the report folder, so the folder is the whole report. */
export function defaultAssetsDir(outDir: string): string {
  return join(outDir, "assets");
}

/** The plotly.js source an output inlines, exactly as it ran, or null when the output is not the bundle. */
export function inlinedPlotly(html: string): string | null {
  if (!html.startsWith(INLINE_PLOTLY_OPEN) || !html.endsWith(INLINE_PLOTLY_CLOSE)) return null;
  const source = html.slice(INLINE_PLOTLY_OPEN.length, html.length - INLINE_PLOTLY_CLOSE.length);
  // the bundle escapes every "</script" it holds, so one that is not the bundle's own end means more markup follows
  return /<\/script/i.test(source) ? null : source;
}

/** The HTML that loads the shared copy at `src` (a URL relative to the notebook's folder). */
export function plotlyScriptHtml(src: string): string {
  return `<script type="text/javascript" src="${src.replace(/&/g, "&amp;").replace(/"/g, "&quot;")}" ${SHARED_PLOTLY_ATTR}="shared"></script>`;
}

/** The shared file's name: by plotly's version, so a later plotly never replaces the one older reports ran with. */
function assetName(source: string): string {
  const version = /plotly\.js v(\d+\.\d+\.\d+[\w.+-]*)/.exec(source.slice(0, 500))?.[1];
  return version ? `plotly-${version}.min.js` : `plotly-${createHash("sha256").update(source).digest("hex").slice(0, 12)}.min.js`;
}

/** Writes `source` as the shared copy in `assetsDir` unless it is there already; returns its path. */
function writeShared(source: string, assetsDir: string): string {
  const file = resolve(assetsDir, assetName(source));
  if (existsSync(file)) {
    if (readFileSync(file, "utf8") === source) return file;
    throw new T2sError("asset_conflict", `${file} exists with other content than the plotly.js this report ran with; move it away or name another folder with --assets`);
  }
  mkdirSync(dirname(file), { recursive: true });
  writeFileAtomic(file, source);
  return file;
}

/** A relative URL from `fromDir` to `file`: "/" separators, each segment percent-encoded. */
function relativeUrl(fromDir: string, file: string): string {
  return relative(resolve(fromDir), file).split(sep).map((s) => (s === ".." ? s : encodeURIComponent(s))).join("/");
}

export interface SharedPlotly {
  /** Bundle outputs replaced by a reference (0: the notebook shows no figure, or was stored slim already). */
  replaced: number;
  /** The shared copies referenced (absolute paths). */
  assets: string[];
  /** Characters of plotly.js taken out of the notebook. */
  removedChars: number;
}

/**
 * Replaces, in place, each output of `nb` that inlines plotly.js by a `<script src>` to the shared copy in
 * `assetsDir` (written there if missing); `notebookDir` is where the notebook and its HTML are stored. No
 * other output changes, so a stored report keeps every number it showed.
 */
export function sharePlotly(nb: Notebook, opts: { notebookDir: string; assetsDir: string }): SharedPlotly {
  const result: SharedPlotly = { replaced: 0, assets: [], removedChars: 0 };
  for (const { output, source, html } of bundleOutputs(nb)) {
    const file = writeShared(source, opts.assetsDir);
    const markup = plotlyScriptHtml(relativeUrl(opts.notebookDir, file));
    output.data["text/html"] = markup;
    result.replaced += 1;
    result.removedChars += html.length - markup.length;
    if (!result.assets.includes(file)) result.assets.push(file);
  }
  return result;
}

/** The outputs of `nb` that inline plotly.js, with their HTML and the source it holds. */
function* bundleOutputs(nb: Notebook): Generator<{ output: DisplayDataOutput | ExecuteResultOutput; html: string; source: string }> {
  for (const cell of nb.cells) {
    if (cell.cell_type !== "code") continue;
    for (const output of cell.outputs) {
      if ((output.output_type !== "display_data" && output.output_type !== "execute_result") || output.data["text/html"] === undefined) continue;
      const html = joinSource(output.data["text/html"] as MultilineString);
      const source = inlinedPlotly(html);
      if (source !== null) yield { output, html, source };
    }
  }
}

/** How many outputs of `nb` inline plotly.js. */
export function countInlinedPlotly(nb: Notebook): number {
  return [...bundleOutputs(nb)].length;
}

export interface StoredReport {
  ipynb: string;
  html: string;
  plotly: SharedPlotly;
  /** Why plotly.js stayed inline (the shared copy could not be written); empty when it did not. */
  inlineReason: string;
  trust: TrustResult;
}

/**
 * Stores `nb` as `<dir>/<name>.ipynb` and `.html` with plotly.js shared (see the top of this file), then
 * signs the notebook for the user's Jupyter. When the shared copy cannot be written a run's report keeps
 * plotly.js inline, with the reason, rather than lose its figures; `strict` throws instead (a conversion
 * has no reason to store a report unchanged).
 */
export function storeReport(nb: Notebook, opts: { dir: string; name: string; assetsDir?: string; strict?: boolean }): StoredReport {
  const ipynb = join(opts.dir, `${opts.name}.ipynb`);
  const html = join(opts.dir, `${opts.name}.html`);
  let plotly: SharedPlotly = { replaced: 0, assets: [], removedChars: 0 };
  let inlineReason = "";
  try {
    // on a copy, so a failure halfway leaves the notebook whole
    const slim = JSON.parse(JSON.stringify(nb)) as Notebook;
    plotly = sharePlotly(slim, { notebookDir: opts.dir, assetsDir: opts.assetsDir ?? defaultAssetsDir(opts.dir) });
    nb = slim;
  } catch (e) {
    if (opts.strict) throw e;
    inlineReason = (e as Error).message;
  }
  mkdirSync(opts.dir, { recursive: true });
  writeFileAtomic(ipynb, serializeNotebook(nb));
  writeFileAtomic(html, renderNotebookHtml(nb, { title: opts.name }));
  return { ipynb, html, plotly, inlineReason, trust: signForJupyter(ipynb) };
}

/** The .ipynb files `paths` name: files as given, folders by the notebooks directly in them. */
export function storedNotebooks(paths: string[]): string[] {
  const out: string[] = [];
  for (const p of paths) {
    if (!existsSync(p)) throw new T2sError("not_found", `${p}: no such file or folder (give executed .ipynb files or the folders holding them)`);
    if (statSync(p).isDirectory()) {
      const found = readdirSync(p).filter((n) => n.endsWith(".ipynb")).sort().map((n) => join(p, n));
      if (!found.length) throw new T2sError("no_notebooks", `${p}: no .ipynb files in this folder`);
      out.push(...found);
    } else if (p.endsWith(".ipynb")) out.push(p);
    else throw new T2sError("bad_notebook", `${p}: not an .ipynb file`);
  }
  return out;
}

export interface SlimResult {
  ipynb: string;
  /** Whether the files were rewritten (false: no inlined plotly.js in it, left as it was). */
  changed: boolean;
  plotly: SharedPlotly;
  trust?: TrustResult;
}

/**
 * Rewrites a stored report (an executed .ipynb and the .html beside it) with plotly.js shared, through the
 * same storeReport a run uses; no kernel runs, so every output but the bundle stays as it was. A notebook
 * with nothing inlined is left untouched.
 */
export function slimStoredReport(ipynb: string, opts: { assetsDir?: string } = {}): SlimResult {
  const nb = readNotebook(ipynb);
  if (!countInlinedPlotly(nb)) return { ipynb, changed: false, plotly: { replaced: 0, assets: [], removedChars: 0 } };
  const stored = storeReport(nb, { dir: dirname(resolve(ipynb)), name: basename(ipynb).replace(/\.ipynb$/i, ""), assetsDir: opts.assetsDir, strict: true });
  return { ipynb, changed: true, plotly: stored.plotly, trust: stored.trust };
}
