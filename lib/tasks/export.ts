/**
 * Export of a task set to the formats distributed trainers read, so the same tasks can be trained on
 * elsewhere. Both are jsonl (parquet would need a heavy dependency; verl and TRL both load jsonl via
 * `datasets`):
 *  - verl: {data_source, prompt: [messages], ability, reward_model: {style: "rule", ground_truth}, extra_info}
 *          with extra_info.task_id / db_path (read by integrations/python compute_score) and
 *          extra_info.tools_kwargs.execute_sql_query.create_kwargs (what verl's agent loop hands the SQL tool);
 *          in tool style also `agent_name: "tool_agent"` per row (so verl runs its tool loop, not the
 *          single-turn default), extra_info.episode_style "tool" and extra_info.tools (the tool schema)
 *  - trl:  {prompt: [messages], solution, task_id, db_id, db_path, split, ...} (extra columns reach TRL
 *          reward functions as keyword arguments: integrations/python trl_reward reads db_path, solution
 *          and task_id).
 * Files: <out>/<format>/train.jsonl and <out>/<format>/test.jsonl (the holdout split).
 */
import { mkdirSync, renameSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import type { Task } from "./types.js";
import type { ChatMessage } from "../core/messages.js";

/** The tool name verl's agent loop looks up in tools_kwargs; the kit's SQL tool (lib/episode/tools.ts). */
const SQL_TOOL = "execute_sql_query";

export type ExportFormat = "verl" | "trl";
export const EXPORT_FORMATS: ExportFormat[] = ["verl", "trl"];

/** verl's registered name of its multi-turn tool loop (verl/experimental/agent_loop/tool_agent_loop.py). */
export const VERL_TOOL_AGENT = "tool_agent";

/** The episode an export is for: tool style carries the tool schemas sent with the prompt. */
export interface ExportEpisode {
  style: "single" | "tool";
  tools?: unknown[];
}

/** One exported record for a task in a format; `messages` is the prompt the policy would see. */
export function exportRecord(task: Task, format: ExportFormat, messages: ChatMessage[], index: number, episode: ExportEpisode = { style: "single" }): Record<string, unknown> {
  const tool = episode.style === "tool";
  const toolInfo = tool ? { episode_style: "tool", tools: episode.tools ?? [] } : {};
  const info = {
    task_id: task.id,
    db_id: task.db_id,
    db_path: task.db_path,
    split: task.split,
    difficulty: task.difficulty,
    archetype: task.archetype,
    style: task.style,
    ...(task.evidence ? { evidence: task.evidence } : {}),
    ...(task.grading ? { grading: task.grading } : {}),
  };
  if (format === "verl") {
    return {
      data_source: `t2s-lab/${task.db_id}`,
      ...(tool ? { agent_name: VERL_TOOL_AGENT } : {}),
      prompt: messages,
      ability: "text2sql",
      reward_model: { style: "rule", ground_truth: task.gold_sql },
      extra_info: { index, ...info, ...toolInfo, need_tools_kwargs: true, tools_kwargs: { [SQL_TOOL]: { create_kwargs: { task_id: task.id, db_path: task.db_path } } } },
    };
  }
  return { prompt: messages, solution: task.gold_sql, ...info, ...(tool ? { episode_style: "tool" } : {}) };
}

/** Writes train.jsonl and test.jsonl for a format under `outDir/<format>`; returns the files and counts. */
export function exportTasks(
  tasks: Task[],
  format: ExportFormat,
  outDir: string,
  messagesFor: (task: Task) => ChatMessage[],
  episode: ExportEpisode = { style: "single" },
): { files: Record<string, string>; counts: Record<string, number> } {
  const dir = join(outDir, format);
  mkdirSync(dir, { recursive: true });
  const parts: Record<string, Task[]> = { train: tasks.filter((t) => t.split === "train"), test: tasks.filter((t) => t.split === "holdout") };
  const files: Record<string, string> = {};
  const counts: Record<string, number> = {};
  for (const [name, list] of Object.entries(parts)) {
    const path = join(dir, `${name}.jsonl`);
    const text = list.map((t, i) => JSON.stringify(exportRecord(t, format, messagesFor(t), i, episode)) + "\n").join("");
    writeFileSync(`${path}.tmp`, text);
    renameSync(`${path}.tmp`, path);
    files[name] = path;
    counts[name] = list.length;
  }
  return { files, counts };
}
