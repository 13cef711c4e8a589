/**
 * Failure analysis over rows, in the style of arquero verbs: pick failures, filter, count by fields, take a
 * seeded sample, and `showHtml` a row as a readable transcript (question, assistant turns, tool calls and
 * their results, the graded SQL, and optionally the got-vs-want rows re-executed through an executor).
 */
import * as aq from "arquero";
import type { Executor, ExecOutcome, SqlValue } from "../db/types.js";
import type { Task } from "../tasks/types.js";
import { SeededRandom } from "../core/random.js";
import type { ChatMessage } from "../policy/types.js";
import { groupOf, isCorrect, outcomeOf, type ReportRow } from "./rows.js";
import type { Table } from "./tables.js";
import { QUERY_TIMEOUT_MS, TOOL_ROWS } from "../core/defaults.js";

/** Returns the rows that were not graded correct. */
export function failures(rows: readonly ReportRow[]): ReportRow[] {
  return rows.filter((r) => !isCorrect(r));
}

/**
 * Returns the rows matching `test`: a predicate, or an object whose fields must equal the row's (a list
 * value matches any of its entries), e.g. where(rows, { outcome: ["sql_error", "no_sql"], difficulty: "hard" }).
 */
export function where(rows: readonly ReportRow[], test: ((r: ReportRow) => boolean) | Record<string, unknown>): ReportRow[] {
  if (typeof test === "function") return rows.filter(test);
  return rows.filter((r) => Object.entries(test).every(([field, want]) => {
    const got = field === "outcome" ? outcomeOf(r) : r[field];
    return Array.isArray(want) ? want.includes(got) : got === want;
  }));
}

/** Returns an arquero table of row counts per combination of `fields` (outcome included as a field), largest first. */
export function countBy(rows: readonly ReportRow[], ...fields: string[]): Table {
  const counts = new Map<string, { key: string[]; n: number }>();
  for (const r of rows) {
    const key = fields.map((f) => (f === "outcome" ? outcomeOf(r) : groupOf(r, f)));
    const id = JSON.stringify(key);
    const c = counts.get(id) ?? { key, n: 0 };
    c.n += 1;
    counts.set(id, c);
  }
  const records = [...counts.values()].sort((a, b) => b.n - a.n || (a.key.join() < b.key.join() ? -1 : 1))
    .map((c) => Object.fromEntries([...fields.map((f, i) => [f, c.key[i]]), ["n", c.n], ["share", rows.length ? c.n / rows.length : 0]]));
  return aq.from(records);
}

/** Returns up to `n` rows picked at random with `seed` (same seed, same rows), in their original order. */
export function sample(rows: readonly ReportRow[], n: number, seed = 0): ReportRow[] {
  if (n >= rows.length) return rows.slice();
  const idx = new SeededRandom(seed).shuffle(rows.map((_, i) => i));
  return idx.slice(0, n).sort((a, b) => a - b).map((i) => rows[i]);
}

/** Returns the rows of one task (all samples and eval runs), sorted by eval run then sample. */
export function taskRows(rows: readonly ReportRow[], taskId: string): ReportRow[] {
  return rows.filter((r) => r.task_id === taskId).sort((a, b) => String(a.eval_run ?? "").localeCompare(String(b.eval_run ?? "")) || a.sample - b.sample);
}

function esc(s: string): string {
  return s.replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;").replace(/"/g, "&quot;");
}

function pre(s: string, cls: string): string {
  return `<pre class="${cls}" style="white-space:pre-wrap;margin:4px 0;padding:6px;background:#f6f8fa;border-radius:4px">${esc(s)}</pre>`;
}

function prettyArgs(raw: string): string {
  try {
    const v = JSON.parse(raw) as Record<string, unknown>;
    if (v && typeof v === "object" && typeof v.query === "string" && Object.keys(v).length === 1) return v.query;
    return JSON.stringify(v, null, 2);
  } catch {
    return raw;
  }
}

function turnHtml(m: ChatMessage, graded: boolean): string {
  const colors: Record<string, string> = { user: "#e8f0fe", assistant: graded ? "#fff4e5" : "#f1f8e9", tool: "#f3e5f5", system: "#eeeeee" };
  const label = m.role === "tool" ? `tool result${m.tool_call_id ? ` (${esc(m.tool_call_id)})` : ""}` : m.role + (graded ? " — graded turn" : "");
  let body = m.content ? pre(m.content, `t2s-${m.role}`) : "";
  for (const c of m.tool_calls ?? []) body += `<div><em>tool call</em> <code>${esc(c.function.name)}</code>${c.id ? ` (${esc(c.id)})` : ""}</div>` + pre(prettyArgs(c.function.arguments), "t2s-toolcall");
  return `<div class="t2s-turn" style="border-left:4px solid #999;background:${colors[m.role] ?? "#fff"};padding:4px 8px;margin:4px 0"><div style="font-size:85%;color:#555">${label}</div>${body}</div>`;
}

function value(v: SqlValue): string {
  if (v === null) return "NULL";
  if (typeof v === "object") return `x'${v.blob}'`;
  return String(v);
}

/** Returns an HTML table of an execution outcome (or its error). */
export function resultHtml(title: string, out: ExecOutcome | null, maxRows = TOOL_ROWS): string {
  if (out === null) return `<div><strong>${esc(title)}</strong><div>not executed</div></div>`;
  if ("error" in out) return `<div><strong>${esc(title)}</strong><div style="color:#d62728">${esc(out.error.kind)}: ${esc(out.error.message)}</div></div>`;
  const head = out.columns.map((c) => `<th>${esc(c)}</th>`).join("");
  const body = out.rows.slice(0, maxRows).map((r) => `<tr>${r.map((v) => `<td>${esc(value(v))}</td>`).join("")}</tr>`).join("");
  const more = out.rows.length > maxRows || out.truncated ? `<div>… ${out.truncated ? "more" : out.rows.length - maxRows} rows not shown</div>` : "";
  return `<div><strong>${esc(title)}</strong> <span style="color:#555">(${out.rows.length}${out.truncated ? "+" : ""} rows)</span><table class="t2s-result">${head ? `<thead><tr>${head}</tr></thead>` : ""}<tbody>${body}</tbody></table>${more}</div>`;
}

export interface ShowOptions {
  /** Tasks by id (for the question's gold SQL and database); needed for got-vs-want. */
  tasks?: Map<string, Task> | Task[];
  /** Executor to re-run the final and gold SQL; without one no rows are shown. */
  executor?: Executor;
  /** Rows shown per result (default TOOL_ROWS, as a tool result). */
  maxRows?: number;
}

function taskFor(row: ReportRow, tasks: ShowOptions["tasks"]): Task | undefined {
  if (!tasks) return undefined;
  if (tasks instanceof Map) return tasks.get(row.task_id);
  return tasks.find((t) => t.id === row.task_id);
}

/**
 * Returns a row as HTML: header (task, outcome, reason, sample, tokens), the transcript (user question,
 * assistant turns with the graded one marked, tool calls and results), the final SQL and, with tasks
 * and an executor, the final and gold queries re-executed side by side.
 */
export async function showHtml(row: ReportRow, opts: ShowOptions = {}): Promise<string> {
  const task = taskFor(row, opts.tasks);
  const outcome = outcomeOf(row);
  const color = outcome === "correct" ? "#2ca02c" : "#d62728";
  const facts = [
    `sample ${row.sample}`, row.eval_run !== undefined ? `eval run ${esc(String(row.eval_run))}` : "", row.difficulty ? esc(row.difficulty) : "", row.archetype ? esc(row.archetype) : "",
    row.tokens_out !== undefined ? `${row.tokens_out} tokens out` : "", row.finish_reason ? `finish ${esc(row.finish_reason)}` : "",
    row.graded_turn !== undefined ? `graded turn ${row.graded_turn} of ${row.n_assistant_turns ?? "?"}` : "",
  ].filter(Boolean).join(" · ");
  let out = `<div class="t2s-show" data-task="${esc(row.task_id)}" style="border:1px solid #ddd;border-radius:6px;padding:8px;margin:8px 0">`;
  out += `<div><strong>${esc(row.task_id)}</strong> <span style="color:${color};font-weight:bold">${esc(outcome)}</span> — ${esc(row.reason ?? "")}</div><div style="font-size:85%;color:#555">${facts}</div>`;
  const turns = row.turns ?? [];
  // the graded turn counts the model's own replies, after any context padding's calls
  let assistantSeen = -(row.pad_calls ?? 0);
  out += `<div class="t2s-transcript">` + turns.map((m) => {
    const graded = m.role === "assistant" && ++assistantSeen === row.graded_turn;
    return turnHtml(m, graded);
  }).join("") + `</div>`;
  out += `<div><strong>final SQL</strong>${row.final_sql ? pre(row.final_sql, "t2s-final-sql") : " <em>none extracted</em>"}</div>`;
  if (task) out += `<div><strong>gold SQL</strong>${pre(task.gold_sql, "t2s-gold-sql")}</div>`;
  if (task && opts.executor) {
    const run = (sql: string | null | undefined) => (sql ? opts.executor!.execute(task.db_path, sql, { timeoutMs: QUERY_TIMEOUT_MS, maxRows: opts.maxRows ?? TOOL_ROWS }) : Promise.resolve(null));
    const [got, want] = await Promise.all([run(row.final_sql), run(task.gold_sql)]);
    out += `<div class="t2s-got-want" style="display:flex;gap:24px;align-items:flex-start"><div>${resultHtml("got (final SQL)", got, opts.maxRows)}</div><div>${resultHtml("want (gold SQL)", want, opts.maxRows)}</div></div>`;
  }
  return out + `</div>`;
}

/** Returns the rows as collapsible <details> blocks (summary line: task, outcome, reason), each opening to showHtml. */
export async function browseHtml(rows: readonly ReportRow[], opts: ShowOptions = {}): Promise<string> {
  const parts: string[] = [];
  for (const r of rows) {
    parts.push(`<details class="t2s-failure"><summary><code>${esc(r.task_id)}</code> #${r.sample} <strong>${esc(outcomeOf(r))}</strong> — ${esc((r.reason ?? "").slice(0, 120))}</summary>${await showHtml(r, opts)}</details>`);
  }
  return `<div class="t2s-browse" data-t2s-table="failure-sample">${parts.join("\n") || "<em>no rows</em>"}</div>`;
}
