/**
 * Static figure export: every figure saved in a report folder is drawn by plotly.js in a headless system
 * Chromium (driven by playwright-core, no network: plotly.js is loaded from node_modules into the page)
 * and written beside its JSON as SVG and PNG (Plotly.toImage) and PDF (page.pdf of the SVG, sized to it).
 */
import { existsSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { T2sError, UsageError } from "../core/errors.js";
import { plotlySource, type PlotlyFigure } from "./display.js";
import { FIGURES_DIR, listFigures, noFiguresError } from "./store.js";

export type FigureFormat = "svg" | "png" | "pdf";
export const FIGURE_FORMATS: FigureFormat[] = ["svg", "png", "pdf"];

/** Places the system Chromium usually lives (Debian's package first). */
export const BROWSER_CANDIDATES = ["/usr/bin/chromium", "/usr/bin/chromium-browser", "/usr/bin/google-chrome", "/usr/bin/google-chrome-stable", "/snap/bin/chromium"];

export const BROWSER_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update"];

/** Returns the browser executable: `explicit`, else T2S_CHROMIUM, else the first candidate that exists; throws a clear error if none. */
export function findBrowser(explicit?: string): string {
  const tried = explicit ? [explicit] : [process.env.T2S_CHROMIUM, ...BROWSER_CANDIDATES].filter((x): x is string => !!x);
  for (const p of tried) if (existsSync(p)) return p;
  throw new T2sError("no_browser",
    `no Chromium found for figure export (looked for ${tried.join(", ")}). Install it with 'sudo apt-get install chromium' ` +
    `(or run 'npm run setup:system'), or point T2S_CHROMIUM / --browser at a Chromium or Chrome binary.`);
}

/** Parses "svg,png,pdf" into formats; throws UsageError naming a bad one. */
export function parseFormats(spec: string): FigureFormat[] {
  const out = spec.split(",").map((s) => s.trim().toLowerCase()).filter(Boolean);
  if (out.length === 0) throw new UsageError("--format needs at least one of svg, png, pdf");
  for (const f of out) if (!FIGURE_FORMATS.includes(f as FigureFormat)) throw new UsageError(`unknown figure format '${f}' (use svg, png or pdf)`);
  return [...new Set(out)] as FigureFormat[];
}

export interface ExportOptions {
  formats?: FigureFormat[];
  /** Browser executable (default: findBrowser()). */
  browser?: string;
  /** Default size in px when a figure's layout has none (900 x 500). */
  width?: number;
  height?: number;
  /** PNG pixel ratio (default 2, for print). */
  scale?: number;
  /** Only figures whose names contain this text. */
  only?: string;
  progress?: (line: string) => void;
}

export interface ExportedFigure {
  name: string;
  files: string[];
}

function size(fig: PlotlyFigure, key: "width" | "height", def: number): number {
  const v = fig.layout?.[key];
  return typeof v === "number" && v > 0 ? Math.round(v) : def;
}

/** Renders every saved figure of the report folder `dir` and returns the files written per figure. */
export async function exportFigures(dir: string, opts: ExportOptions = {}): Promise<ExportedFigure[]> {
  const formats = opts.formats ?? FIGURE_FORMATS;
  const figures = listFigures(dir).filter((f) => !opts.only || f.name.includes(opts.only));
  if (figures.length === 0) throw opts.only ? new T2sError("no_figures", `no figure in ${join(dir, FIGURES_DIR)} has '${opts.only}' in its name`) : noFiguresError(dir);
  const executablePath = findBrowser(opts.browser);
  const { chromium } = await import("playwright-core");
  const browser = await chromium.launch({ executablePath, args: BROWSER_FLAGS, headless: true });
  const out: ExportedFigure[] = [];
  try {
    const page = await browser.newPage();
    // offline: anything the page tries to fetch is refused
    await page.route("**/*", (route) => route.abort());
    await page.setContent("<!doctype html><html><head><meta charset=\"utf-8\"></head><body style=\"margin:0\"><div id=\"fig\"></div></body></html>");
    await page.addScriptTag({ content: plotlySource() });
    for (const f of figures) {
      const width = size(f.figure, "width", opts.width ?? 900);
      const height = size(f.figure, "height", opts.height ?? 500);
      const files: string[] = [];
      const spec = { data: f.figure.data, layout: { ...(f.figure.layout ?? {}), width, height }, config: { staticPlot: true } };
      // page code as a string: lib has no DOM types
      const render = (format: string, scale: number) => page.evaluate(
        `(async () => { const s = ${JSON.stringify(spec)}; const el = document.getElementById("fig"); await Plotly.newPlot(el, s.data, s.layout, s.config); ` +
        `return await Plotly.toImage(el, { format: ${JSON.stringify(format)}, width: ${width}, height: ${height}, scale: ${scale} }); })()`,
      ) as Promise<string>;
      let svgText: string | null = null;
      if (formats.includes("svg") || formats.includes("pdf")) {
        const url = await render("svg", 1);
        svgText = decodeURIComponent(url.slice(url.indexOf(",") + 1));
      }
      if (formats.includes("svg")) {
        const p = join(dir, FIGURES_DIR, `${f.name}.svg`);
        writeFileSync(p, svgText as string);
        files.push(p);
      }
      if (formats.includes("png")) {
        const url = await render("png", opts.scale ?? 2);
        const p = join(dir, FIGURES_DIR, `${f.name}.png`);
        writeFileSync(p, Buffer.from(url.slice(url.indexOf(",") + 1), "base64"));
        files.push(p);
      }
      if (formats.includes("pdf")) {
        const pdfPage = await browser.newPage();
        await pdfPage.setContent(`<!doctype html><html><head><meta charset="utf-8"><style>@page{size:${width}px ${height}px;margin:0}html,body{margin:0}</style></head><body>${svgText}</body></html>`);
        const p = join(dir, FIGURES_DIR, `${f.name}.pdf`);
        await pdfPage.pdf({ path: p, width: `${width}px`, height: `${height}px`, printBackground: true, pageRanges: "1" });
        await pdfPage.close();
        files.push(p);
      }
      opts.progress?.(`${f.name}: ${files.map((x) => x.slice(x.lastIndexOf(".") + 1)).join(", ")}`);
      out.push({ name: f.name, files });
    }
  } finally {
    await browser.close();
  }
  return out;
}
