/**
 * The summary `npm start` prints at the end: pass@1 (95% CI), pass@k and pass^k of the base and of each
 * candidate on the demo's holdout slice, then each candidate's paired delta against the base with its
 * interval, p and verdict, and a note saying what the candidate is (a short live continuation is labelled
 * as one: it is not expected to move the holdout; a shipped round shows what a full round does). The
 * shipped round leads, in the summary and in notebook 05's headline table, since its effect is what the
 * demo exists to show; the live continuation follows it.
 */
import { pairedDelta } from "../stats/delta.js";
import { fmtP, formatTable } from "../stats/format.js";
import { readStatRows } from "../stats/rows.js";
import { summarize } from "../stats/summary.js";

/** A model benchmarked on the same slice, k, temperature and seeds as the base. */
export interface DemoCandidate {
  label: string;
  rows: string;
  /** What it is, in a few words (printed under its delta). */
  note: string;
}

export interface DemoSummaryInput {
  baseRows: string;
  candidates: DemoCandidate[];
  /** First line, e.g. "demo finished in 12m03s (short CPU configuration)". */
  heading: string;
  /** Closing lines (where the reports and rows are). */
  footer?: string[];
}

/** The demo's candidates in reading order: the shipped round first (when there is one), then the live continuation. */
export function demoCandidates(live: DemoCandidate, shipped: DemoCandidate | null): DemoCandidate[] {
  return shipped ? [shipped, live] : [live];
}

/** Notebook 05's parameters for the demo: the first candidate is `b` (the headline table), a second one `c`. */
export function deltaNotebookParams(baseRows: string, candidates: readonly DemoCandidate[]): Record<string, string> {
  const [first, second] = candidates;
  return { a: baseRows, b: first.rows, label_b: first.label, ...(second ? { c: second.rows, label_c: second.label } : {}) };
}

const pct = (x: number | null | undefined) => (x === null || x === undefined ? "-" : (100 * x).toFixed(1));
const signedPct = (x: number | null | undefined) => (x === null || x === undefined ? "-" : `${x > 0 ? "+" : ""}${(100 * x).toFixed(1)}`);
const ci = (c: readonly [number, number] | null | undefined, f: (x: number) => string = pct) => (c ? `[${f(c[0])}, ${f(c[1])}]` : "-");

/** Returns the summary's lines (numbers in points of pass@1, i.e. percent). */
export function demoSummaryLines(input: DemoSummaryInput): string[] {
  const base = readStatRows(input.baseRows).rows;
  const table: string[][] = [];
  const add = (label: string, rows: typeof base) => {
    const s = summarize(rows);
    table.push([label, String(s.n_tasks), pct(s.pass1), ci(s.pass1_ci), pct(s.passk), pct(s.powk)]);
  };
  add("base", base);
  const deltas = input.candidates.map((c) => {
    const rows = readStatRows(c.rows).rows;
    add(c.label, rows);
    return { c, d: pairedDelta(base, rows) };
  });
  const lines = [input.heading, "", ...formatTable(["model", "tasks", "pass@1", "95% CI", "pass@k", "pass^k"], table, ["model", "95% CI"]).trimEnd().split("\n")];
  if (deltas.length) {
    lines.push("", "paired delta against the base, in points of pass@1 (95% bootstrap interval over the paired tasks):");
    const rows = deltas.map(({ c, d }) => [c.label, signedPct(d.delta), ci(d.ci, signedPct), fmtP(d.p), d.verdict, String(d.n_paired)]);
    lines.push(...formatTable(["candidate", "delta", "95% CI", "p", "verdict", "tasks"], rows, ["candidate", "95% CI", "verdict"]).trimEnd().split("\n"));
    lines.push("", ...deltas.map(({ c }) => `${c.label}: ${c.note}`));
  }
  return ["", ...lines, ...(input.footer?.length ? ["", ...input.footer] : [])];
}
