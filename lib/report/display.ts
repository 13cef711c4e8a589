/**
 * Display helpers for notebooks on the tslab kernel: HTML and inline Plotly figures that work offline.
 * plotly.js (plotly.js-dist-min) is inlined once per kernel session, before the first figure; each figure
 * is then a div plus a Plotly.newPlot call. A stored report does not keep that copy: `t2s notebooks run`
 * replaces it by a script loading one shared file (lib/notebooks/store.ts, which recognises the bundle by
 * how plotlyBundleHtml opens it). The *Html functions only build strings and work anywhere; the display
 * functions need a running tslab kernel.
 *
 * Lib code here is also compiled by tslab (TypeScript 5.0, CommonJS): no import.meta, no newer syntax.
 */
import { readFileSync } from "node:fs";
import { createRequire } from "node:module";
import { kitPath } from "../core/paths.js";
import { T2sError } from "../core/errors.js";

/** A Plotly figure: traces, layout and config as plain JSON (see plotly.js docs for the fields). */
export interface PlotlyFigure {
  data: Array<Record<string, unknown>>;
  layout?: Record<string, unknown>;
  config?: Record<string, unknown>;
}

export interface FigureOptions {
  /** CSS width/height of the figure's div (default "100%" x "420px"). */
  width?: string;
  height?: string;
}

interface TslabDisplay {
  html(s: string): void;
  text(s: string): void;
}

const INLINED = "__t2sPlotlyInlined";

function kitRequire(): NodeRequire {
  return createRequire(kitPath("package.json"));
}

/** The tslab display API of the running kernel; throws T2sError outside a notebook. */
function tslabDisplay(): TslabDisplay {
  let tslab: { display: TslabDisplay };
  try {
    // resolved from the kit, so it is the same tslab module instance the kernel runs
    tslab = kitRequire()("tslab");
  } catch (e) {
    throw new T2sError("no_tslab", `the tslab package cannot be loaded (${(e as Error).message}); run npm ci`);
  }
  return {
    html: (s: string) => callDisplay(() => tslab.display.html(s)),
    text: (s: string) => callDisplay(() => tslab.display.text(s)),
  };
}

function callDisplay(fn: () => void): void {
  try {
    fn();
  } catch (e) {
    if ((e as Error).message === "Not ready") {
      throw new T2sError("not_in_notebook", "display helpers only work inside a tslab notebook kernel; use the *Html functions elsewhere");
    }
    throw e;
  }
}

/** JSON that is safe inside a <script> element (no "</script>", no "<!--"). */
export function scriptJson(value: unknown): string {
  return JSON.stringify(value ?? null).replace(/</g, "\\u003c").replace(/\u2028/g, "\\u2028").replace(/\u2029/g, "\\u2029");
}

/** The plotly.js source from plotly.js-dist-min. */
export function plotlySource(): string {
  return readFileSync(kitRequire().resolve("plotly.js-dist-min"), "utf8");
}

/** A <script> element holding all of plotly.js (about 4.8 MB), so figures render without network. */
export function plotlyBundleHtml(): string {
  return `<script type="text/javascript">/* plotly.js-dist-min, inlined by t2s-lab */\n${plotlySource().replace(/<\/script/gi, "<\\/script")}\n</script>`;
}

let figureCounter = 0;

/** HTML for one figure: a div and the Plotly.newPlot call (expects plotly.js loaded earlier on the page). */
export function plotlyFigureHtml(fig: PlotlyFigure, opts: FigureOptions = {}): string {
  figureCounter += 1;
  const id = `t2s-plot-${Date.now().toString(36)}-${figureCounter}`;
  const style = `width:${opts.width ?? "100%"};height:${opts.height ?? "420px"}`;
  const config = { responsive: true, displaylogo: false, ...(fig.config ?? {}) };
  return (
    `<div id="${id}" class="t2s-plotly" style="${style}"></div>\n` +
    `<script type="text/javascript">(function(){var el=document.getElementById(${scriptJson(id)});` +
    `if(!window.Plotly){el.textContent="plotly.js is not loaded: re-run the notebook's first figure cell (a stored report loads it from the assets folder it was stored with)";return;}` +
    `window.Plotly.newPlot(el,${scriptJson(fig.data)},${scriptJson(fig.layout ?? {})},${scriptJson(config)});})();</script>`
  );
}

/** Shows HTML in the notebook. */
export function html(markup: string): void {
  tslabDisplay().html(markup);
}

/** Shows plain text in the notebook. */
export function text(s: string): void {
  tslabDisplay().text(s);
}

/**
 * Inlines plotly.js into the notebook once per kernel session (force: again, e.g. after clearing the
 * output that held it). Returns true when it emitted the bundle now.
 */
export function ensurePlotly(opts: { force?: boolean } = {}): boolean {
  const g = globalThis as Record<string, unknown>;
  if (g[INLINED] && !opts.force) return false;
  tslabDisplay().html(plotlyBundleHtml());
  g[INLINED] = true;
  return true;
}

/** Shows a Plotly figure inline (inlining plotly.js first if this session has not yet). */
export function plotly(fig: PlotlyFigure, opts: FigureOptions = {}): void {
  ensurePlotly();
  tslabDisplay().html(plotlyFigureHtml(fig, opts));
}
