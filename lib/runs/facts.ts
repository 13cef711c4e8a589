/**
 * The failure breakdown of a set of rollout rows: how replies went wrong (no SQL, SQL error, wrong rows,
 * truncated, unsafe, tool misuse) and what they cost (tokens, latency, turns). Complements the pass@k
 * summary of lib/stats, which only sees `correct`.
 */
import type { RolloutRow } from "./row.js";

export interface RolloutFacts {
  rows: number;
  /** Rows per outcome. */
  outcomes: Record<string, number>;
  /** Share of rows with no SQL found. */
  no_sql_rate: number;
  /** Share of rows whose SQL did not run (has SQL, does not execute; truncated and unsafe counted apart). */
  sql_error_rate: number;
  truncated_rate: number;
  unsafe_rate: number;
  /** Share of rows with at least one invalid tool call. */
  tool_misuse_rate: number;
  mean_tokens_out: number;
  mean_latency_ms: number;
  mean_assistant_turns: number;
  mean_tool_calls: number;
  /** Requests retried over all rows. */
  rerolls: number;
}

const mean = (xs: number[]) => (xs.length ? xs.reduce((a, b) => a + b, 0) / xs.length : 0);

/** Returns the failure breakdown and cost averages of `rows`. */
export function rolloutFacts(rows: readonly RolloutRow[]): RolloutFacts {
  const n = rows.length;
  const outcomes: Record<string, number> = {};
  for (const r of rows) outcomes[r.outcome] = (outcomes[r.outcome] ?? 0) + 1;
  const rate = (pred: (r: RolloutRow) => boolean) => (n ? rows.filter(pred).length / n : 0);
  return {
    rows: n,
    outcomes,
    no_sql_rate: rate((r) => !r.has_sql),
    sql_error_rate: rate((r) => r.has_sql && !r.executes && r.outcome !== "truncated" && r.outcome !== "unsafe"),
    truncated_rate: rate((r) => r.outcome === "truncated"),
    unsafe_rate: rate((r) => r.outcome === "unsafe"),
    tool_misuse_rate: rate((r) => (r.invalid_tool_calls ?? 0) > 0),
    mean_tokens_out: mean(rows.map((r) => r.tokens_out ?? 0)),
    mean_latency_ms: mean(rows.map((r) => r.latency_ms ?? 0)),
    mean_assistant_turns: mean(rows.map((r) => r.n_assistant_turns ?? 0)),
    mean_tool_calls: mean(rows.map((r) => r.n_tool_calls ?? 0)),
    rerolls: rows.reduce((s, r) => s + (r.rerolls ?? 0), 0),
  };
}

/** Returns the breakdown as a few readable lines. */
export function formatFacts(f: RolloutFacts): string {
  const pct = (x: number) => `${(100 * x).toFixed(1)}%`;
  const outcomes = Object.entries(f.outcomes).sort((a, b) => b[1] - a[1]).map(([k, v]) => `${k} ${v}`).join(", ");
  return [
    `outcomes: ${outcomes || "-"}`,
    `no SQL ${pct(f.no_sql_rate)} | SQL error ${pct(f.sql_error_rate)} | truncated ${pct(f.truncated_rate)} | unsafe ${pct(f.unsafe_rate)} | tool misuse ${pct(f.tool_misuse_rate)}`,
    `per episode: ${f.mean_tokens_out.toFixed(0)} tokens out, ${(f.mean_latency_ms / 1000).toFixed(2)} s model time, ${f.mean_assistant_turns.toFixed(2)} assistant turns, ${f.mean_tool_calls.toFixed(2)} tool calls`,
  ].join("\n") + "\n";
}
