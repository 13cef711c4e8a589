/**
 * Plotly figure specs (plain JSON {data, layout}) for benchmark rows: pass@1 by group with interval
 * whiskers, outcome x group stacked bars and heatmap, pass@k curves, per-task pass-rate histogram and
 * headroom by group. Builders only compute; showing and saving is notebook-report.ts's job.
 */
import type { PlotlyFigure } from "./display.js";
import { passAtKCurve, taskPassRates, defaultK, summarizeTasks } from "../stats/summary.js";
import { DEFAULT_B, DEFAULT_SEED } from "../stats/bootstrap.js";
import { groupOf, groupsIn, outcomeOf, outcomesIn, type ReportRow } from "./rows.js";

/** Colours per outcome, stable across figures (green = right, reds = failures). */
export const OUTCOME_COLORS: Record<string, string> = {
  correct: "#2ca02c", wrong_rows: "#ff7f0e", too_large: "#bcbd22", sql_error: "#d62728", timeout: "#9467bd",
  unsafe: "#8c564b", no_sql: "#7f7f7f", truncated: "#e377c2",
};

/** Line colours for groups; a group's pass@k and pass^k share one. */
const PALETTE = ["#1f77b4", "#2ca02c", "#ff7f0e", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf"];

const FONT = { family: "Helvetica, Arial, sans-serif", size: 13 };

function baseLayout(title: string, extra: Record<string, unknown> = {}): Record<string, unknown> {
  return { title: { text: title }, font: FONT, margin: { l: 70, r: 30, t: 60, b: 80 }, ...extra };
}

export interface GroupFigureOptions {
  k?: number;
  B?: number;
  seed?: number;
}

/** Returns pass@1 per value of `field` as bars with 95% bootstrap-interval whiskers (n tasks in hover). */
export function pass1ByGroupFigure(rows: readonly ReportRow[], field: string, opts: GroupFigureOptions = {}): PlotlyFigure {
  const groups = groupsIn(rows, field);
  const stats = groups.map((g) => summarizeTasks(rows.filter((r) => groupOf(r, field) === g), null, opts.B ?? DEFAULT_B, opts.seed ?? DEFAULT_SEED));
  const y = stats.map((s) => s.pass1 ?? 0);
  return {
    data: [{
      type: "bar", name: "pass@1", x: groups, y,
      marker: { color: "#1f77b4" },
      error_y: {
        type: "data", symmetric: false, visible: true,
        array: stats.map((s, i) => (s.pass1_ci ? s.pass1_ci[1] - y[i] : 0)),
        arrayminus: stats.map((s, i) => (s.pass1_ci ? y[i] - s.pass1_ci[0] : 0)),
      },
      customdata: stats.map((s) => s.n_tasks),
      hovertemplate: "%{x}: %{y:.3f} (%{customdata} tasks)<extra></extra>",
    }],
    layout: baseLayout(`pass@1 by ${field} (95% bootstrap CI over tasks)`, { yaxis: { title: { text: "pass@1" }, range: [0, 1] }, xaxis: { title: { text: field } } }),
  };
}

/** Returns stacked bars: share of rows per outcome within each value of `field`. */
export function outcomeStackFigure(rows: readonly ReportRow[], field: string): PlotlyFigure {
  const groups = groupsIn(rows, field);
  const sizes = groups.map((g) => rows.filter((r) => groupOf(r, field) === g).length);
  const data = outcomesIn(rows).map((o) => ({
    type: "bar", name: o, x: groups,
    y: groups.map((g, i) => rows.filter((r) => groupOf(r, field) === g && outcomeOf(r) === o).length / Math.max(1, sizes[i])),
    marker: { color: OUTCOME_COLORS[o] ?? "#17becf" },
  }));
  return { data, layout: baseLayout(`Outcomes by ${field} (share of rows)`, { barmode: "stack", yaxis: { title: { text: "share of rows" }, range: [0, 1] }, xaxis: { title: { text: field } } }) };
}

/** Returns a heatmap of the share of rows per outcome (columns) within each value of `field` (rows). */
export function outcomeHeatmapFigure(rows: readonly ReportRow[], field: string): PlotlyFigure {
  const groups = groupsIn(rows, field);
  const outcomes = outcomesIn(rows);
  const z = groups.map((g) => {
    const inGroup = rows.filter((r) => groupOf(r, field) === g);
    return outcomes.map((o) => inGroup.filter((r) => outcomeOf(r) === o).length / Math.max(1, inGroup.length));
  });
  return {
    data: [{ type: "heatmap", x: outcomes, y: groups, z, colorscale: "Blues", zmin: 0, zmax: 1, texttemplate: "%{z:.2f}", hovertemplate: "%{y} / %{x}: %{z:.3f}<extra></extra>" }],
    layout: baseLayout(`Outcome x ${field} (share of the group's rows)`, { margin: { l: 200, r: 30, t: 60, b: 80 }, height: Math.max(320, 60 + 36 * groups.length) }),
  };
}

/** Returns pass@k (solid) and pass^k (dashed) for k = 1..n, overall and, with `field`, per group. */
export function passAtKCurveFigure(rows: readonly ReportRow[], field?: string, maxK?: number): PlotlyFigure {
  const sets: Array<[string, readonly ReportRow[]]> = [["all", rows]];
  if (field) for (const g of groupsIn(rows, field)) sets.push([g, rows.filter((r) => groupOf(r, field) === g)]);
  const data: Array<Record<string, unknown>> = [];
  sets.forEach(([name, rs], i) => {
    const curve = passAtKCurve(rs, maxK);
    const ks = curve.map((p) => p.k);
    const line = { width: i === 0 ? 3 : 1.5, color: PALETTE[i % PALETTE.length] };
    data.push({ type: "scatter", mode: "lines+markers", name: `${name} pass@k`, legendgroup: name, x: ks, y: curve.map((p) => p.passk), line });
    data.push({ type: "scatter", mode: "lines", name: `${name} pass^k`, legendgroup: name, x: ks, y: curve.map((p) => p.powk), line: { ...line, dash: "dash" } });
  });
  return {
    data,
    layout: baseLayout(`pass@k and pass^k, k = 1..n${field ? ` by ${field}` : ""}`, { xaxis: { title: { text: "k" }, dtick: 1 }, yaxis: { title: { text: "rate" }, range: [0, 1] } }),
  };
}

/** Returns a histogram of per-task pass rates (c/n), bins of 1/n when every task has n samples. */
export function taskRateHistogramFigure(rows: readonly ReportRow[]): PlotlyFigure {
  const rates = taskPassRates(rows);
  const n = rates.reduce((m, t) => Math.max(m, t.n), 1);
  const size = 1 / Math.max(1, Math.min(n, 20));
  return {
    data: [{ type: "histogram", x: rates.map((t) => t.rate), xbins: { start: -size / 2, end: 1 + size / 2, size }, marker: { color: "#1f77b4" }, name: "tasks" }],
    layout: baseLayout(`Per-task pass rate (${rates.length} tasks; 0 = always wrong, 1 = always right)`, { xaxis: { title: { text: "pass rate c/n" }, range: [-0.05, 1.05] }, yaxis: { title: { text: "tasks" } }, bargap: 0.05 }),
  };
}

/** Returns headroom (pass@k - pass@1) per value of `field`, with pass@1 and pass@k side by side. */
export function headroomFigure(rows: readonly ReportRow[], field: string, opts: GroupFigureOptions = {}): PlotlyFigure {
  const k = opts.k ?? defaultK(rows);
  const groups = groupsIn(rows, field);
  const stats = groups.map((g) => summarizeTasks(rows.filter((r) => groupOf(r, field) === g), k, 1, opts.seed ?? DEFAULT_SEED));
  return {
    data: [
      { type: "bar", name: "pass@1", x: groups, y: stats.map((s) => s.pass1), marker: { color: "#1f77b4" } },
      { type: "bar", name: `pass@${k ?? "k"}`, x: groups, y: stats.map((s) => s.passk), marker: { color: "#aec7e8" } },
      { type: "scatter", mode: "markers", name: "headroom", x: groups, y: stats.map((s) => s.headroom), marker: { color: "#d62728", size: 11, symbol: "diamond" } },
    ],
    layout: baseLayout(`Headroom by ${field}: pass@${k ?? "k"} - pass@1`, { barmode: "group", yaxis: { title: { text: "rate" }, range: [0, 1] }, xaxis: { title: { text: field } } }),
  };
}
