/**
 * `t2s report`: the statistics of a rows file (pass@1 with a bootstrap interval, pass@k, pass^k and headroom),
 * by group. The notebooks' reports (tables and figures) are lib/report's.
 */
import type { Command } from "commander";
import { UsageError } from "../core/errors.js";
import { DEFAULT_B, DEFAULT_SEED } from "../stats/bootstrap.js";
import { fmt, fmtCI, formatTable } from "../stats/format.js";
import { duplicatesNote, evalRuns, loadStatRows, readingNotes, setupErrorsNote, taskCounts, type RowsFile, type StatRow } from "../stats/rows.js";
import { summarize, type Summary, type SummaryStats } from "../stats/summary.js";
import { behaviourLines, behaviourProfile } from "../report/behaviour.js";
import { collect, intOption, printJson } from "./options.js";
import { findMeta } from "../runs/meta.js";

interface ReportFlags {
  rows: string;
  by: string[];
  k?: number;
  B: number;
  seed: number;
  skipBad?: boolean;
  json?: boolean;
  behaviour?: boolean;
  baseline?: string;
  run?: string;
}

/** Reads a rows file for a stats command (only run_id `run` when given), telling stderr what was skipped; throws when nothing is left. */
export function loadRowsForStats(path: string, skipBad: boolean | undefined, run?: string): RowsFile {
  const file = loadStatRows(path, { skipBad, run });
  // the duplicates line goes to stdout above the numbers (duplicatesLine)
  for (const note of readingNotes(path, file, { duplicates: false, setupErrors: false })) process.stderr.write(`${note}\n`);
  // one run_id whose rows were added under --force with another setup: the rows cannot tell them apart
  const forced = findMeta(path)?.forced ?? [];
  if (forced.length) process.stderr.write(`warning: ${path}: rows were added under --force with another setup (${forced.join("; ")}); its numbers pool them\n`);
  return file;
}

/** The lines a report prints when it dropped duplicate rows or left out setup-error rows (empty when neither). */
export function duplicatesLine(path: string, file: RowsFile): string {
  return (file.duplicates.count ? `${duplicatesNote(path, file.duplicates)}\n` : "") + (file.setupErrors.count ? `${setupErrorsNote(path, file.setupErrors)}\n` : "");
}

/** Refuses a --by field no row has, naming the fields the rows do have. */
export function checkByFields(rows: readonly StatRow[], by: readonly string[]): void {
  const present = new Set<string>();
  for (const row of rows) for (const [k, v] of Object.entries(row)) if (v !== undefined && v !== null && typeof v !== "object") present.add(k);
  for (const field of by) {
    if (!present.has(field)) throw new UsageError(`--by ${field}: no row has this field; fields with values: ${[...present].sort().join(", ")}`);
  }
}

function kTasks(rows: readonly StatRow[], k: number | null): number {
  return k === null ? 0 : taskCounts(rows).filter((t) => t.n >= k).length;
}

/** Returns the readable text of a summary. */
export function formatSummary(path: string, rows: readonly StatRow[], s: Summary, B: number, seed: number): string {
  const runs = evalRuns(rows).length;
  const k = s.k;
  let out = `${path}: ${s.n_rows} rows, ${s.n_tasks} tasks, ${runs} eval run${runs === 1 ? "" : "s"}; ` +
    `k = ${k === null ? "- (fewer than 2 samples per task)" : k === 1 ? "1 (pass@1 = pass^1 = pass@k)" : k}; 95% bootstrap over tasks (B = ${B}, seed ${seed})\n\n`;
  const nk = kTasks(rows, k);
  const table = [["pass@1", fmt(s.pass1), fmtCI(s.pass1_ci), String(s.n_tasks)]];
  // at k = 1, pass@k and pass^k are pass@1 itself: one row says it
  const kWay = k !== null && k > 1;
  if (kWay) {
    table.push([`pass@${k}`, fmt(s.passk), fmtCI(s.passk_ci), String(nk)]);
    table.push([`pass^${k}`, fmt(s.powk), fmtCI(s.powk_ci), String(nk)]);
    table.push(["headroom", fmt(s.headroom), "", ""]);
  }
  out += formatTable(["metric", "value", "95% CI", "tasks"], table, ["metric", "95% CI"]);
  for (const [field, groups] of Object.entries(s.by)) {
    const header = [field, "tasks", "rows", "pass@1", "95% CI"];
    if (kWay) header.push(`pass@${k}`, `pass^${k}`, "headroom");
    const lines = Object.entries(groups).map(([value, g]: [string, SummaryStats]) => {
      const cells = [value, String(g.n_tasks), String(g.n_rows), fmt(g.pass1), fmtCI(g.pass1_ci)];
      if (kWay) cells.push(fmt(g.passk), fmt(g.powk), fmt(g.headroom));
      return cells;
    });
    out += `\nby ${field}\n` + formatTable(header, lines, [field, "95% CI"]);
  }
  return out;
}

export function registerReport(program: Command): void {
  program
    .command("report")
    .description("pass@1 with a 95% bootstrap interval, pass@k, pass^k and headroom of a rows file, overall and by group")
    .requiredOption("--rows <file>", "rollout rows file (jsonl with task_id, sample, eval_run, correct)")
    .option("--by <field>", "also report per value of this row field (repeatable, e.g. --by difficulty --by archetype)", collect, [])
    .option("--k <n>", "k for pass@k and pass^k (default: the smallest per-task sample count in one eval run, if >= 2)", intOption("--k", 1))
    .option("--B <n>", "bootstrap resamples", intOption("--B", 1), DEFAULT_B)
    .option("--seed <n>", "bootstrap seed", intOption("--seed", 0), DEFAULT_SEED)
    .option("--skip-bad", "skip malformed lines and rows without task_id/correct (default: stop at the first, naming file:line)")
    .option("--json", "print JSON: n_tasks, n_rows, k, pass1, pass1_ci, passk, passk_ci, powk, powk_ci, headroom, by, duplicates_dropped, setup_errors_left_out (and behaviour with --behaviour)")
    .option("--behaviour", "also print the behaviour profile: executable SQL, answers with a query the episode ran, tool calls, invalid calls, tool errors, turns, no committed query, tokens (per episode)")
    .option("--run <run_id>", "only the rows of this run (a file holding rows of several runs is refused otherwise)")
    .option("--baseline <file>", "with --behaviour: a second rows file (e.g. the base model's) shown as the 'before' column, with the change")
    .action((opts: ReportFlags) => {
      if (opts.baseline && !opts.behaviour) throw new UsageError("--baseline needs --behaviour");
      const file = loadRowsForStats(opts.rows, opts.skipBad, opts.run);
      checkByFields(file.rows, opts.by);
      const summary = summarize(file.rows, { k: opts.k, by: opts.by, B: opts.B, seed: opts.seed });
      summary.duplicates_dropped += file.duplicates.count;
      summary.setup_errors_left_out += file.setupErrors.count;
      const sets = opts.behaviour ? [...(opts.baseline ? [{ label: "before", rows: loadRowsForStats(opts.baseline, opts.skipBad).rows }] : []), { label: opts.baseline ? "after" : "rows", rows: file.rows }] : [];
      if (opts.json) printJson(opts.behaviour ? { ...summary, behaviour: Object.fromEntries(sets.map((x) => [x.label, behaviourProfile(x.rows)])) } : summary);
      else {
        process.stdout.write(duplicatesLine(opts.rows, file) + formatSummary(opts.rows, file.rows, summary, opts.B, opts.seed));
        if (opts.behaviour) process.stdout.write(`\nbehaviour${opts.baseline ? ` (before: ${opts.baseline})` : ""}\n${behaviourLines(sets).join("\n")}\n`);
      }
    });
}
