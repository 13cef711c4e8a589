/**
 * Arquero tables from rollout rows: the headline table of a benchmark (pass@1 with its interval, pass@k,
 * pass^k, failure rates, tokens per reply) and the same numbers per group. Tables hold plain numbers so
 * they can be reused (filter, join, export); `tableHtml` formats them for reading.
 */
import * as aq from "arquero";
import { summarize, summarizeTasks, defaultK } from "../stats/summary.js";
import { DEFAULT_B, DEFAULT_SEED } from "../stats/bootstrap.js";
import { groupsIn, groupOf, isCorrect, isTruncated, outcomeOf, outcomesIn, type ReportRow } from "./rows.js";

export type Table = aq.ColumnTable;

export interface TableOptions {
  /** k for pass@k and pass^k (default: the per-run sample count, as lib/stats chooses). */
  k?: number;
  B?: number;
  seed?: number;
}

function rate(rows: readonly ReportRow[], pred: (r: ReportRow) => boolean): number | null {
  return rows.length ? rows.filter(pred).length / rows.length : null;
}

function avg(xs: number[]): number | null {
  return xs.length ? xs.reduce((a, b) => a + b, 0) / xs.length : null;
}

/** The failure and cost numbers of a set of rows (shares of rows). */
export function failureRates(rows: readonly ReportRow[]): { no_sql: number | null; sql_error: number | null; truncated: number | null; tokens_per_reply: number | null } {
  return {
    no_sql: rate(rows, (r) => outcomeOf(r) === "no_sql" || r.has_sql === false),
    sql_error: rate(rows, (r) => r.has_sql !== false && (r.executes === false || outcomeOf(r) === "sql_error")),
    truncated: rate(rows, isTruncated),
    tokens_per_reply: avg(rows.filter((r) => typeof r.tokens_out === "number").map((r) => (r.tokens_out as number) / Math.max(1, r.n_assistant_turns ?? 1))),
  };
}

function statsRecord(label: Record<string, string>, rows: readonly ReportRow[], k: number | null, B: number, seed: number): Record<string, unknown> {
  const s = summarizeTasks(rows, k, B, seed);
  return {
    ...label,
    tasks: s.n_tasks,
    rows: s.n_rows,
    k: s.k,
    pass1: s.pass1,
    pass1_lo: s.pass1_ci ? s.pass1_ci[0] : null,
    pass1_hi: s.pass1_ci ? s.pass1_ci[1] : null,
    passk: s.passk,
    powk: s.powk,
    headroom: s.headroom,
    ...failureRates(rows),
  };
}

/**
 * Returns the headline table: one row per label (default: the rows' policy) with tasks, rows, k, pass@1
 * and its 95% bootstrap interval over tasks, pass@k, pass^k, headroom, no-SQL / SQL-error / truncated
 * shares of rows and output tokens per reply.
 */
export function headlineTable(rows: readonly ReportRow[], opts: TableOptions & { label?: string } = {}): Table {
  const k = opts.k ?? defaultK(rows);
  const label = opts.label ?? String(rows[0]?.policy ?? rows[0]?.model ?? "rows");
  return aq.from([statsRecord({ model: label }, rows, k, opts.B ?? DEFAULT_B, opts.seed ?? DEFAULT_SEED)]);
}

/** Returns the headline numbers per value of `field` (difficulty, archetype, ...), one row per group. */
export function groupTable(rows: readonly ReportRow[], field: string, opts: TableOptions = {}): Table {
  const k = opts.k ?? defaultK(rows);
  const records = groupsIn(rows, field).map((g) =>
    statsRecord({ [field]: g }, rows.filter((r) => groupOf(r, field) === g), k, opts.B ?? DEFAULT_B, opts.seed ?? DEFAULT_SEED));
  return aq.from(records);
}

/** Returns rows-per-outcome counts and shares for each value of `field`: columns field, outcome, n, share. */
export function outcomeTable(rows: readonly ReportRow[], field: string): Table {
  const outcomes = outcomesIn(rows);
  const records: Record<string, unknown>[] = [];
  for (const g of groupsIn(rows, field)) {
    const inGroup = rows.filter((r) => groupOf(r, field) === g);
    for (const o of outcomes) {
      const n = inGroup.filter((r) => outcomeOf(r) === o).length;
      records.push({ [field]: g, outcome: o, n, share: inGroup.length ? n / inGroup.length : 0 });
    }
  }
  return aq.from(records);
}

/** Returns the rows as a flat arquero table (transcripts left out) for ad-hoc queries. */
export function rowsTable(rows: readonly ReportRow[]): Table {
  return aq.from(rows.map((r) => ({
    task_id: r.task_id, sample: r.sample, eval_run: r.eval_run ?? "0", difficulty: r.difficulty ?? null, archetype: r.archetype ?? null,
    outcome: outcomeOf(r), correct: isCorrect(r), executes: r.executes ?? null, has_sql: r.has_sql ?? null,
    reward: r.reward ?? null, reason: r.reason ?? null, final_sql: r.final_sql ?? null, tokens_out: r.tokens_out ?? null,
    finish_reason: r.finish_reason ?? null, n_assistant_turns: r.n_assistant_turns ?? null, graded_turn: r.graded_turn ?? null,
  })));
}

/** Returns the summary of lib/stats for the rows (with groups), for code that wants the raw numbers. */
export function summaryOf(rows: readonly ReportRow[], by: string[] = ["difficulty", "archetype"], opts: TableOptions = {}) {
  return summarize(rows, { k: opts.k, by, B: opts.B, seed: opts.seed });
}

const HEADERS: Record<string, string> = {
  pass1: "pass@1", pass1_lo: "CI low", pass1_hi: "CI high", passk: "pass@k", powk: "pass^k", no_sql: "no SQL",
  sql_error: "SQL error", truncated: "truncated", tokens_per_reply: "tokens/reply",
};

function esc(s: string): string {
  return s.replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;").replace(/"/g, "&quot;");
}

function cell(v: unknown, digits: number): string {
  if (v === null || v === undefined) return "–";
  if (typeof v === "number") return Number.isInteger(v) ? String(v) : v.toFixed(digits);
  return esc(typeof v === "string" ? v : JSON.stringify(v));
}

/**
 * Returns an HTML table of `table` (numbers to `digits` decimals, null as "–"), wrapped in an element
 * carrying data-t2s-table=name so reports can be checked for it. pass1_lo/pass1_hi become one "95% CI" column.
 */
export function tableHtml(table: Table, opts: { name?: string; title?: string; digits?: number; limit?: number } = {}): string {
  const digits = opts.digits ?? 3;
  const names = table.columnNames();
  const ci = names.includes("pass1_lo") && names.includes("pass1_hi");
  const cols = names.filter((c) => !(ci && c === "pass1_hi"));
  const k = names.includes("k") ? (table.objects({ limit: 1 })[0] as Record<string, unknown>)?.k : null;
  const head = cols.map((c) => {
    let h = HEADERS[c] ?? c;
    if (c === "pass1_lo" && ci) h = "95% CI";
    if (k && (c === "passk" || c === "powk")) h = h.replace("k", String(k));
    return `<th>${esc(h)}</th>`;
  }).join("");
  const body = (table.objects({ limit: opts.limit }) as Record<string, unknown>[]).map((o) => "<tr>" + cols.map((c) => {
    if (c === "pass1_lo" && ci) return `<td>${o.pass1_lo === null || o.pass1_lo === undefined ? "–" : `[${cell(o.pass1_lo, digits)}, ${cell(o.pass1_hi, digits)}]`}</td>`;
    return `<td>${cell(o[c], digits)}</td>`;
  }).join("") + "</tr>").join("\n");
  const title = opts.title ? `<div class="t2s-table-title"><strong>${esc(opts.title)}</strong></div>` : "";
  const more = opts.limit !== undefined && table.numRows() > opts.limit ? `<div>… ${table.numRows() - opts.limit} more rows</div>` : "";
  return `<div class="t2s-table" data-t2s-table="${esc(opts.name ?? "table")}">${title}<table><thead><tr>${head}</tr></thead><tbody>\n${body}\n</tbody></table>${more}</div>`;
}
