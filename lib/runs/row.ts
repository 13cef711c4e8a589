/**
 * The rollout row, the kit's one row schema: one jsonl line per sampled episode. Every statistic and
 * figure is computed from these. This file holds types and two pure helpers (the row key, the model's
 * own turns), so report code that notebooks import can name a row without pulling the episode loop into
 * tslab's compile.
 */
import type { ChatMessage, FinishReason } from "../policy/types.js";
import type { EpisodeStyle, ToolProtocol } from "../episode/prompt.js";
import type { Outcome } from "../verifier/types.js";
import type { SETUP_ERROR, StatRow } from "../stats/rows.js";

/** A row as the kit writes it. (A type, not an interface: it is then a StatRow without a cast.) */
export type RolloutRow = {
  run_id: string;
  eval_run: string;
  task_id: string;
  db_id: string;
  split: string;
  difficulty: string;
  archetype: string;
  /** The question's wording style (casual, formal, ...), not the episode style. */
  question_style: string;
  /** 0-based sample index of this task in this eval run. */
  sample: number;
  /** Sampling seed of the first turn, derived from (run seed, eval run, task, sample). */
  seed: number;
  policy: string;
  model: string | null;
  adapter: string | null;
  style: EpisodeStyle;
  protocol: ToolProtocol | null;
  /** The conversation after the system prompt: user question, assistant turns, tool calls and results. */
  turns: ChatMessage[];
  n_assistant_turns: number;
  /** 1-based assistant turn that was graded (0: the model never answered). */
  graded_turn: number;
  final_sql: string | null;
  /** The grade's outcome, or "setup_error": the server refused the episode's request for the run's setup
   * (`setup_error` says why); such a row is no sample, and every statistic leaves it out. */
  outcome: Outcome | typeof SETUP_ERROR;
  correct: boolean;
  executes: boolean;
  has_sql: boolean;
  reward: number;
  reason: string;
  tokens_in: number;
  tokens_out: number;
  finish_reason: FinishReason;
  latency_ms: number;
  n_tool_calls: number;
  invalid_tool_calls: number;
  /** Requests of this episode that were retried (429, 5xx, connection, timeout). */
  rerolls: number;
  truncated_by: string | null;
  /** The server that answered the graded turn, when the policy spreads requests over several. */
  endpoint?: string;
  /** Why the request was refused, on a setup-error row: "context_exceeded", "auth", "not_found", ... */
  setup_error?: string;
  /** A padded run's target prompt length in tokens (benchmark --pad-context); absent when not padded. */
  pad_context?: number;
  /** Padding tool calls put before the model's first turn (each two messages in `turns`, after the question). */
  pad_calls?: number;
};

/**
 * A row as read back from a rows file, which may come from another tool or an older kit: the fields every
 * statistic needs (StatRow: task_id, sample, correct as true/false/0/1, eval_run), any of the kit's other
 * fields, and whatever else the file holds.
 */
export interface RowRecord extends StatRow, Partial<Omit<RolloutRow, "task_id" | "sample" | "correct" | "eval_run">> {}

/** The identity of a row within a rows file: (eval run, task, sample). */
export function rowKey(evalRun: string, taskId: string, sample: number): string {
  return `${evalRun}\u0000${taskId}\u0000${sample}`;
}

/**
 * The turns the model itself took part in: the question, then what followed the context padding (a
 * padded row's `turns` hold its `pad_calls` call/result pairs right after the question). Counts of the
 * model's tool use and of its graded turn read these, so padding is never taken for its behaviour.
 */
export function modelTurns(row: { turns?: ChatMessage[]; pad_calls?: number }): ChatMessage[] {
  const turns = row.turns ?? [];
  const pad = row.pad_calls ?? 0;
  return pad > 0 ? [...turns.slice(0, 1), ...turns.slice(1 + 2 * pad)] : turns;
}
