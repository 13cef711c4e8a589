/**
 * The paired comparison of two rows files (a = before, b = after) as tables and figures: the headline
 * delta with interval, p and verdict, per-run deltas, markers, a forest plot of deltas by group, and the
 * pass@1 vs pass^k shift. Numbers come from lib/stats (pairedDelta / compareRows); this file only lays them out.
 */
import * as aq from "arquero";
import { pairedDelta, compareRows, type DeltaReport, type DeltaStats, type DeltaDetail } from "../stats/delta.js";
import { summarizeTasks, defaultK } from "../stats/summary.js";
import { DEFAULT_SEED } from "../stats/bootstrap.js";
import type { PlotlyFigure } from "./display.js";
import { type ReportRow } from "./rows.js";
import type { Table } from "./tables.js";

export interface DeltaAnalysis {
  report: DeltaReport;
  detail: DeltaDetail;
  labelA: string;
  labelB: string;
}

/** Runs the paired comparison of `a` and `b`, overall and per `by` field. */
export function analyzeDelta(a: readonly ReportRow[], b: readonly ReportRow[], opts: { by?: string[]; B?: number; seed?: number; labelA?: string; labelB?: string } = {}): DeltaAnalysis {
  const by = opts.by ?? ["difficulty", "archetype"];
  const report = pairedDelta(a, b, { by, B: opts.B, seed: opts.seed });
  const detail = compareRows(a, b, { B: opts.B, seed: opts.seed });
  return { report, detail, labelA: opts.labelA ?? "a", labelB: opts.labelB ?? "b" };
}

function ciParts(s: { ci: [number, number] | null }): { lo: number | null; hi: number | null } {
  return { lo: s.ci ? s.ci[0] : null, hi: s.ci ? s.ci[1] : null };
}

/** Returns the headline comparison: paired tasks, a, b, delta, CI, p, verdict, runs, detectable effect, tasks needed. */
export function deltaHeadlineTable(d: DeltaAnalysis): Table {
  const s = d.report;
  return aq.from([{
    metric: "pass@1", paired_tasks: s.n_paired, a: d.detail.a, b: d.detail.b, delta: s.delta, ...ciParts(s), p: s.p, verdict: s.verdict,
    runs_a: s.runs_a, runs_b: s.runs_b, detectable_effect: s.detectable_effect, tasks_needed: s.tasks_needed,
  }]);
}

/** Returns one row per marker (executes, has_sql, ...): a, b, delta, CI, p. */
export function markerTable(d: DeltaAnalysis): Table {
  return aq.from(Object.entries(d.report.markers).map(([marker, m]) => ({ marker, paired_tasks: m.n_paired, a: m.a, b: m.b, delta: m.delta, ...ciParts(m), p: m.p })));
}

/** Returns the per-run deltas (run i of a vs run i of b) with each run's pass@1. */
export function runDeltaTable(d: DeltaAnalysis): Table {
  const r = d.detail;
  return aq.from(d.report.run_deltas.map((delta, i) => ({
    run: i + 1, run_a: r.run_ids_a[i] ?? null, run_b: r.run_ids_b[i] ?? null, pass1_a: r.run_pass1_a[i] ?? null, pass1_b: r.run_pass1_b[i] ?? null, delta,
  })));
}

/** Returns the deltas per group of every `by` field: field, group, paired tasks, delta, CI, p, verdict. */
export function groupDeltaTable(d: DeltaAnalysis): Table {
  const records: Record<string, unknown>[] = [];
  for (const [field, groups] of Object.entries(d.report.by)) {
    for (const [group, s] of Object.entries(groups) as Array<[string, DeltaStats]>) {
      records.push({ field, group, paired_tasks: s.n_paired, delta: s.delta, ...ciParts(s), p: s.p, verdict: s.verdict });
    }
  }
  return aq.from(records);
}

/** Returns a forest plot: overall delta and each group's delta with its 95% interval, a zero line, one band per field. */
export function forestPlotFigure(d: DeltaAnalysis, fields?: string[]): PlotlyFigure {
  const labels: string[] = [];
  const xs: Array<number | null> = [];
  const lo: number[] = [];
  const hi: number[] = [];
  const sizes: number[] = [];
  const push = (label: string, s: DeltaStats) => {
    labels.push(`${label} (n=${s.n_paired})`);
    xs.push(s.delta);
    lo.push(s.delta !== null && s.ci ? s.delta - s.ci[0] : 0);
    hi.push(s.delta !== null && s.ci ? s.ci[1] - s.delta : 0);
    sizes.push(Math.max(6, Math.min(18, 4 + Math.sqrt(s.n_paired) * 1.5)));
  };
  push("overall", d.report);
  for (const field of fields ?? Object.keys(d.report.by)) {
    for (const [group, s] of Object.entries(d.report.by[field] ?? {}) as Array<[string, DeltaStats]>) push(`${field}: ${group}`, s);
  }
  const y = labels.map((_, i) => labels.length - i);
  return {
    data: [{
      type: "scatter", mode: "markers", x: xs, y, text: labels, name: "paired delta",
      marker: { size: sizes, color: xs.map((_, i) => (i === 0 ? "#d62728" : "#1f77b4")), symbol: xs.map((_, i) => (i === 0 ? "diamond" : "square")) },
      error_x: { type: "data", symmetric: false, array: hi, arrayminus: lo, visible: true },
      hovertemplate: "%{text}: %{x:+.3f}<extra></extra>",
    }],
    layout: {
      title: { text: `Paired delta of pass@1 (${d.labelB} - ${d.labelA}) with 95% bootstrap CI` }, font: { family: "Helvetica, Arial, sans-serif", size: 12 },
      height: Math.max(320, 90 + 26 * labels.length), margin: { l: 260, r: 30, t: 60, b: 50 },
      xaxis: { title: { text: "delta pass@1" }, zeroline: true, zerolinewidth: 2 },
      yaxis: { tickvals: y, ticktext: labels, automargin: true },
      shapes: [{ type: "line", x0: 0, x1: 0, yref: "paper", y0: 0, y1: 1, line: { color: "#444", dash: "dot" } }],
    },
  };
}

/** Returns pass@1, pass@k and pass^k of a and b on their paired tasks, as a before/after slope chart. */
export function passShiftFigure(a: readonly ReportRow[], b: readonly ReportRow[], opts: { k?: number; labelA?: string; labelB?: string } = {}): PlotlyFigure {
  const ids = new Set(a.map((r) => r.task_id));
  const bIds = new Set(b.map((r) => r.task_id));
  const pa = a.filter((r) => bIds.has(r.task_id));
  const pb = b.filter((r) => ids.has(r.task_id));
  const k = opts.k ?? Math.min(defaultK(pa) ?? 1, defaultK(pb) ?? 1);
  const sa = summarizeTasks(pa, k > 1 ? k : null, 1, DEFAULT_SEED);
  const sb = summarizeTasks(pb, k > 1 ? k : null, 1, DEFAULT_SEED);
  const x = [opts.labelA ?? "a", opts.labelB ?? "b"];
  const line = (name: string, ya: number | null, yb: number | null, dash: string, color: string) =>
    ({ type: "scatter", mode: "lines+markers+text", name, x, y: [ya, yb], line: { dash, color, width: 2.5 }, marker: { size: 10 }, text: [ya, yb].map((v) => (v === null ? "" : v.toFixed(3))), textposition: "top center" });
  const data = [line("pass@1", sa.pass1, sb.pass1, "solid", "#1f77b4")];
  if (k > 1) {
    data.push(line(`pass@${k}`, sa.passk, sb.passk, "dot", "#2ca02c"));
    data.push(line(`pass^${k}`, sa.powk, sb.powk, "dash", "#d62728"));
  }
  return {
    data,
    layout: {
      title: { text: `pass@1 vs pass^${k > 1 ? k : "k"} shift on ${sa.n_tasks} paired tasks (reliability vs coverage)` }, font: { family: "Helvetica, Arial, sans-serif", size: 12 },
      yaxis: { title: { text: "rate" }, range: [0, 1.05] }, xaxis: { type: "category" }, margin: { l: 60, r: 30, t: 60, b: 50 },
    },
  };
}

/** Returns the plain-language lines of the comparison: verdict, interval, what the holdout can and cannot show. */
export function deltaSummaryLines(d: DeltaAnalysis): string[] {
  const s = d.report;
  const f = (x: number | null, signed = false) => (x === null ? "–" : (signed && x > 0 ? "+" : "") + x.toFixed(3));
  const lines = [
    `${d.labelA} -> ${d.labelB}: pass@1 ${f(d.detail.a)} -> ${f(d.detail.b)}, paired delta ${f(s.delta, true)} ` +
      `[${s.ci ? `${f(s.ci[0], true)}, ${f(s.ci[1], true)}` : "–"}] over ${s.n_paired} tasks, p = ${s.p === null ? "–" : s.p.toFixed(4)}; verdict: ${s.verdict}`,
    `eval runs: ${s.runs_a} (a) and ${s.runs_b} (b)${s.runs_a < 2 || s.runs_b < 2 ? " — with fewer than 2 runs a side the eval noise is not measured; re-run the benchmark with another --eval-run" : ""}`,
  ];
  if (s.detectable_effect !== null) lines.push(`what this holdout can prove: with ${s.n_paired} paired tasks, an effect of about ${f(s.detectable_effect)} is detectable (80% power, 5% level)`);
  if (s.tasks_needed !== null && s.delta !== null) lines.push(`to detect the observed delta ${f(s.delta, true)} reliably you would need about ${s.tasks_needed} paired tasks`);
  return lines;
}

