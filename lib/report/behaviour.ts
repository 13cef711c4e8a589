/**
 * The behaviour profile of a rows file: how episodes use the SQL tool, not only whether they end correct.
 * Read from each row's turns, so it can be recomputed from any committed rows file:
 *  - executable: the committed query ran (correct or not);
 *  - answered with a query it ran: the committed query is one the episode ran through the tool, exactly
 *    (same text) or normalised (comments, whitespace, a trailing semicolon and letter case aside);
 *  - episodes with a tool call, tool calls / invalid calls / tool errors per episode (a tool error is a
 *    result that came back as an error: bad SQL, a timeout, an unsafe statement, an unusable call);
 *  - assistant turns per episode, episodes with no committed query (no SQL, or cut by a budget), and
 *    tokens generated and prompt tokens read per episode.
 * Native calls are read from `tool_calls`, hermes calls from `<tool_call>` blocks in the assistant text.
 */
import * as aq from "arquero";
import { parseHermesCalls } from "../episode/tools.js";
import { toolResponseBodies } from "../model/toolcalls.js";
import type { ChatMessage } from "../policy/types.js";
import { normalizeSql } from "../verifier/extract.js";
import { formatTable } from "../stats/format.js";
import type { StatRow } from "../stats/rows.js";
import type { Table } from "./tables.js";
import { modelTurns } from "../runs/row.js";

export interface BehaviourProfile {
  episodes: number;
  executable: number;
  answered_with_ran_query: number;
  answered_with_ran_query_exact: number;
  with_tool_call: number;
  tool_calls: number;
  invalid_tool_calls: number;
  tool_errors: number;
  assistant_turns: number;
  no_committed_query: number;
  tokens_out: number;
  tokens_in: number;
}

/** The queries an episode ran through the tool, in order (native and hermes calls alike). */
export function toolQueries(turns: readonly ChatMessage[]): string[] {
  const out: string[] = [];
  for (const m of turns) {
    if (m.role !== "assistant") continue;
    const args = m.tool_calls?.length ? m.tool_calls.map((c) => c.function.arguments) : parseHermesCalls(m.content ?? "").map((c) => c.arguments);
    for (const a of args) {
      try {
        const q = (JSON.parse(a ?? "") as { query?: unknown })?.query;
        if (typeof q === "string" && q.trim()) out.push(q);
      } catch {
        // an unparsable call ran nothing
      }
    }
  }
  return out;
}

/** Tool results that came back as errors (a native tool turn, or a hermes <tool_response> block). */
export function toolErrors(turns: readonly ChatMessage[]): number {
  let n = 0;
  for (const m of turns) {
    if (m.role === "tool") n += /^error/.test(m.content ?? "") ? 1 : 0;
    else if (m.role === "user") n += toolResponseBodies(m.content ?? "").filter((b) => b.startsWith("error")).length;
  }
  return n;
}

const loose = (sql: string) => (normalizeSql(sql) ?? "").toLowerCase();

/** The profile of a set of rows (per-episode means and shares); any rows file's rows, fields read where present. */
export function behaviourProfile(rows: readonly StatRow[]): BehaviourProfile {
  const n = rows.length;
  const sum = { executable: 0, ran: 0, ranExact: 0, withCall: 0, calls: 0, invalid: 0, errors: 0, turns: 0, none: 0, out: 0, in: 0 };
  for (const r of rows) {
    const turns = Array.isArray(r.turns) ? modelTurns({ turns: r.turns as ChatMessage[], pad_calls: typeof r.pad_calls === "number" ? r.pad_calls : 0 }) : [];
    const queries = toolQueries(turns);
    const final = typeof r.final_sql === "string" ? r.final_sql : null;
    if (r.executes === true) sum.executable++;
    if (final !== null && queries.some((q) => q.trim() === final.trim())) sum.ranExact++;
    if (final !== null && queries.some((q) => loose(q) === loose(final))) sum.ran++;
    const calls = typeof r.n_tool_calls === "number" ? r.n_tool_calls : queries.length;
    if (calls > 0) sum.withCall++;
    sum.calls += calls;
    sum.invalid += typeof r.invalid_tool_calls === "number" ? r.invalid_tool_calls : 0;
    sum.errors += toolErrors(turns);
    sum.turns += typeof r.n_assistant_turns === "number" ? r.n_assistant_turns : turns.filter((m) => m.role === "assistant").length;
    if (r.outcome === "no_sql" || r.outcome === "truncated" || final === null) sum.none++;
    sum.out += typeof r.tokens_out === "number" ? r.tokens_out : 0;
    sum.in += typeof r.tokens_in === "number" ? r.tokens_in : 0;
  }
  const mean = (x: number) => (n ? x / n : 0);
  return {
    episodes: n,
    executable: mean(sum.executable),
    answered_with_ran_query: mean(sum.ran),
    answered_with_ran_query_exact: mean(sum.ranExact),
    with_tool_call: mean(sum.withCall),
    tool_calls: mean(sum.calls),
    invalid_tool_calls: mean(sum.invalid),
    tool_errors: mean(sum.errors),
    assistant_turns: mean(sum.turns),
    no_committed_query: mean(sum.none),
    tokens_out: mean(sum.out),
    tokens_in: mean(sum.in),
  };
}

/** What each profile field means, in table order (the row labels of behaviourTable). */
export const BEHAVIOUR_FIELDS: ReadonlyArray<[keyof BehaviourProfile, string]> = [
  ["episodes", "episodes"],
  ["executable", "share with executable SQL"],
  ["answered_with_ran_query", "share answering with a query it ran (normalised)"],
  ["answered_with_ran_query_exact", "share answering with a query it ran (exact)"],
  ["with_tool_call", "share with at least one tool call"],
  ["tool_calls", "tool calls per episode"],
  ["invalid_tool_calls", "invalid tool calls per episode"],
  ["tool_errors", "tool errors per episode"],
  ["assistant_turns", "assistant turns per episode"],
  ["no_committed_query", "share with no committed query"],
  ["tokens_out", "tokens generated per episode"],
  ["tokens_in", "prompt tokens per episode"],
];

/** One row per profile field, one column per labelled rows set (e.g. base and tuned), plus the change when there are two. */
export function behaviourTable(sets: ReadonlyArray<{ label: string; rows: readonly StatRow[] }>): Table {
  const profiles = sets.map((s) => behaviourProfile(s.rows));
  return aq.from(BEHAVIOUR_FIELDS.map(([key, label]) => {
    const rec: Record<string, unknown> = { measure: label };
    sets.forEach((s, i) => (rec[s.label] = profiles[i][key]));
    // every record carries the column (arquero takes its columns from the first record)
    if (sets.length === 2) rec.change = key === "episodes" ? null : profiles[1][key] - profiles[0][key];
    return rec;
  }));
}

/** The profile as aligned text lines (the CLI's table): shares and means to 3 decimals, the change signed. */
export function behaviourLines(sets: ReadonlyArray<{ label: string; rows: readonly StatRow[] }>): string[] {
  const profiles = sets.map((s) => behaviourProfile(s.rows));
  const signed = (v: number) => (v >= 0 ? "+" : "") + v.toFixed(3);
  const rows = BEHAVIOUR_FIELDS.map(([key, label]) => {
    const values = profiles.map((p) => (key === "episodes" ? String(p[key]) : p[key].toFixed(3)));
    const change = profiles.length === 2 ? [key === "episodes" ? "" : signed(profiles[1][key] - profiles[0][key])] : [];
    return [label, ...values, ...change];
  });
  const header = ["measure", ...sets.map((s) => s.label), ...(sets.length === 2 ? ["change"] : [])];
  return formatTable(header, rows, ["measure"]).trimEnd().split("\n");
}
