/** The rollout row: one jsonl line per sampled episode. Every statistic and figure is computed from these. */
import type { ChatMessage, FinishReason } from "../policy/types.js";
import type { EpisodeStyle, ToolProtocol } from "../episode/prompt.js";
import type { EpisodeResult } from "../episode/loop.js";
import type { Outcome } from "../verifier/types.js";
import type { Task } from "../tasks/types.js";

export interface RolloutRow {
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
  outcome: Outcome;
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
  error?: string;
}

/** What the runner knows about an episode before it runs: the row's fields that do not come from the task or the grade. */
export type RowContext = Pick<RolloutRow, "run_id" | "eval_run" | "sample" | "seed" | "policy" | "model" | "adapter" | "style" | "protocol" | "rerolls">;

/** Builds the row for a finished episode of `task`. */
export function makeRow(task: Task, ctx: RowContext, ep: EpisodeResult): RolloutRow {
  const g = ep.grade;
  return {
    run_id: ctx.run_id,
    eval_run: ctx.eval_run,
    task_id: task.id,
    db_id: task.db_id,
    split: task.split,
    difficulty: String(task.difficulty),
    archetype: task.archetype,
    question_style: task.style,
    sample: ctx.sample,
    seed: ctx.seed,
    policy: ctx.policy,
    model: ctx.model,
    adapter: ctx.adapter,
    style: ctx.style,
    protocol: ctx.protocol,
    turns: ep.messages.filter((m) => m.role !== "system"),
    n_assistant_turns: ep.n_assistant_turns,
    graded_turn: ep.graded_turn,
    final_sql: g.sql,
    outcome: g.outcome,
    correct: g.correct,
    executes: g.executes,
    has_sql: g.sql !== null,
    reward: g.reward,
    reason: g.reason,
    tokens_in: ep.tokens_in,
    tokens_out: ep.tokens_out,
    finish_reason: ep.finish_reason,
    latency_ms: ep.latency_ms,
    n_tool_calls: ep.n_tool_calls,
    invalid_tool_calls: ep.invalid_tool_calls,
    rerolls: ctx.rerolls,
    truncated_by: ep.truncated_by,
    ...(ep.endpoint !== undefined ? { endpoint: ep.endpoint } : {}),
  };
}

/** The identity of a row within a rows file: (eval run, task, sample). */
export function rowKey(evalRun: string, taskId: string, sample: number): string {
  return `${evalRun}\u0000${taskId}\u0000${sample}`;
}
