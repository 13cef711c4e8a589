/**
 * A notebook's report: every table and figure is returned as a value, shown inline in the notebook (when
 * running in a tslab kernel) and saved into the report folder for export. Names become
 * `data-t2s-figure` / `data-t2s-table` attributes in the HTML, so a report can be checked for them.
 */
import { ensurePlotly, html, plotlyFigureHtml, text, type FigureOptions, type PlotlyFigure } from "./display.js";
import { saveFigure, saveTableCsv, checkName } from "./store.js";
import { tableHtml, type Table } from "./tables.js";

export interface ReportOptions {
  /** Report folder (figures/ and tables/ are written inside); null: save nothing. */
  dir: string | null;
  /** Prefix of saved names, e.g. "01" gives figures/01-pass1-by-difficulty.json. */
  prefix?: string;
  /** Show outputs inline (default true; false for use outside a notebook). */
  inline?: boolean;
}

function esc(s: string): string {
  return s.replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;").replace(/"/g, "&quot;");
}

/** Returns the HTML of a named figure: a wrapper carrying the name, a caption, and the Plotly div. */
export function namedFigureHtml(name: string, fig: PlotlyFigure, opts: FigureOptions & { caption?: string } = {}): string {
  const height = opts.height ?? (typeof fig.layout?.height === "number" ? `${fig.layout.height}px` : undefined);
  return `<div class="t2s-figure" data-t2s-figure="${esc(name)}">${plotlyFigureHtml(fig, { ...opts, height })}` +
    `${opts.caption ? `<div class="t2s-caption" style="font-size:90%;color:#444">${esc(opts.caption)}</div>` : ""}</div>`;
}

export class NotebookReport {
  readonly dir: string | null;
  readonly prefix: string;
  readonly inline: boolean;
  /** Paths written so far (figures JSON, tables CSV). */
  readonly saved: string[] = [];

  constructor(opts: ReportOptions) {
    this.dir = opts.dir;
    this.prefix = opts.prefix ? `${opts.prefix}-` : "";
    this.inline = opts.inline ?? true;
  }

  private fullName(name: string): string {
    const n = this.prefix + name;
    checkName(n);
    return n;
  }

  /** Shows `fig` inline, saves it as figures/<prefix>-<name>.json and returns it. */
  figure(name: string, fig: PlotlyFigure, opts: FigureOptions & { caption?: string } = {}): PlotlyFigure {
    const full = this.fullName(name);
    if (this.dir) this.saved.push(saveFigure(this.dir, full, fig));
    if (this.inline) {
      ensurePlotly();
      html(namedFigureHtml(full, fig, opts));
    }
    return fig;
  }

  /** Shows `table` inline as HTML, saves it as tables/<prefix>-<name>.csv and returns it. */
  table(name: string, table: Table, opts: { title?: string; digits?: number; limit?: number } = {}): Table {
    const full = this.fullName(name);
    if (this.dir) this.saved.push(saveTableCsv(this.dir, full, table.toCSV()));
    if (this.inline) html(tableHtml(table, { ...opts, name: full }));
    return table;
  }

  /** Shows HTML inline (wrapped with a data-t2s-table name when given) and returns it. */
  html(markup: string, name?: string): string {
    const out = name ? `<div data-t2s-table="${esc(this.prefix + name)}">${markup}</div>` : markup;
    if (this.inline) html(out);
    return out;
  }

  /** Shows lines of text inline (and returns them joined). */
  text(lines: string | string[]): string {
    const s = Array.isArray(lines) ? lines.join("\n") : lines;
    if (this.inline) text(s);
    return s;
  }
}
