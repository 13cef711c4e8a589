/** The rollout row of a finished episode (the task's fields, the runner's context and the grade), or of a refused one. */
import type { EpisodeResult } from "../episode/loop.js";
import type { Task } from "../tasks/types.js";
import type { ChatMessage } from "../policy/types.js";
import { SETUP_ERROR } from "../stats/rows.js";
import type { RolloutRow } from "./row.js";

/** What the runner knows about an episode before it runs: the row's fields that do not come from the task or the grade. */
export type RowContext = Pick<RolloutRow, "run_id" | "eval_run" | "sample" | "seed" | "policy" | "model" | "adapter" | "style" | "protocol" | "rerolls" | "pad_context" | "pad_calls">;

/** The fields that say which task, run, sample and policy a row is of: every row kind starts with them. */
function rowIdentity(task: Task, ctx: RowContext) {
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
    ...(ctx.pad_context !== undefined ? { pad_context: ctx.pad_context, pad_calls: ctx.pad_calls ?? 0 } : {}),
  };
}

/** Builds the row for a finished episode of `task`. */
export function makeRow(task: Task, ctx: RowContext, ep: EpisodeResult): RolloutRow {
  const g = ep.grade;
  return {
    ...rowIdentity(task, ctx),
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

/**
 * Builds the row of an episode the server refused for the run's setup (`reason` e.g. "context_exceeded",
 * `message` the refusal): outcome "setup_error", the opening question as its only turn, no grade. The row
 * records the refusal; statistics leave it out, and a later run of the same command runs the sample again.
 */
export function makeSetupRow(task: Task, ctx: RowContext, opening: ChatMessage[], reason: string, message: string): RolloutRow {
  return {
    ...rowIdentity(task, ctx),
    turns: opening.filter((m) => m.role !== "system"),
    n_assistant_turns: 0,
    graded_turn: 0,
    final_sql: null,
    outcome: SETUP_ERROR,
    correct: false,
    executes: false,
    has_sql: false,
    reward: 0,
    reason: message,
    tokens_in: 0,
    tokens_out: 0,
    finish_reason: "stop",
    latency_ms: 0,
    n_tool_calls: 0,
    invalid_tool_calls: 0,
    rerolls: ctx.rerolls,
    truncated_by: null,
    setup_error: reason,
  };
}
