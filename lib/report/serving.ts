/**
 * The serving check: after training, does the served adapter behave like the trained one? Each check
 * returns PASS/FAIL (or SKIP when its inputs are missing) with the reason in numbers.
 */
import { existsSync, readFileSync } from "node:fs";
import { join, resolve } from "node:path";
import * as aq from "arquero";
import { T2sError } from "../core/errors.js";
import { checkAdapter } from "../model/adapter-check.js";
import { readTasks } from "../tasks/io.js";
import { readRunTasks, RUN_TASKS_FILE, sampleTaskIds, selectRunTasks, type RunSelection } from "../tasks/select.js";
import { isCorrect, type ReportRow } from "./rows.js";
import type { Table } from "./tables.js";
import { readTrainLog, type TrainRecord } from "./training.js";

export interface Check {
  check: string;
  status: "PASS" | "FAIL" | "SKIP";
  reason: string;
}

const f3 = (x: number) => x.toFixed(3);

/** TRL log_history keys and the train_log.jsonl fields they mean (TRL's GRPOTrainer names). */
const TRL_FIELDS: Record<string, string> = {
  reward: "reward_mean",
  reward_std: "reward_std",
  kl: "kl",
  entropy: "entropy",
  frac_reward_zero_std: "frac_reward_zero_std",
  "completions/mean_length": "completion_length_mean",
  "clip_ratio/region_mean": "clip_ratio_region",
  loss: "loss",
  learning_rate: "lr",
};

/**
 * Reads a trainer's reward log in either format: the kit's train_log.jsonl, or TRL's trainer_state.json
 * (its `log_history` entries that carry a reward, fields renamed to the kit's; the last `step` is 0-based
 * like the kit's). Throws T2sError naming the file when it is neither.
 */
export function readRewardLog(path: string): TrainRecord[] {
  if (!existsSync(path)) throw new T2sError("not_found", `reward log ${path} does not exist`);
  if (!path.endsWith(".json")) return readTrainLog(path);
  let state: { log_history?: Array<Record<string, unknown>> };
  try {
    state = JSON.parse(readFileSync(path, "utf8"));
  } catch (e) {
    throw new T2sError("bad_log", `${path}: not valid JSON (${(e as Error).message})`);
  }
  if (!state || !Array.isArray(state.log_history)) throw new T2sError("bad_log", `${path}: no "log_history" list (expected TRL's trainer_state.json)`);
  return state.log_history
    .filter((h) => typeof h.reward === "number")
    .map((h) => {
      const rec: TrainRecord = { step: typeof h.step === "number" ? h.step - 1 : undefined };
      for (const [from, to] of Object.entries(TRL_FIELDS)) if (typeof h[from] === "number") rec[to] = h[from];
      return rec;
    });
}

/**
 * Checks that a server would place the adapter on the base before anything is served: every LoRA weight
 * maps to a module of the base under PEFT's and vLLM's names, shapes fit, and it is not all zeros.
 */
export function checkAdapterPlacement(baseDir: string, adapterDir: string): Check {
  const name = "adapter weights map to the base (PEFT and vLLM names)";
  if (!existsSync(baseDir) || !existsSync(adapterDir)) return { check: name, status: "SKIP", reason: `no local ${existsSync(baseDir) ? "adapter" : "base"} folder to check (${existsSync(baseDir) ? adapterDir : baseDir})` };
  const r = checkAdapter(baseDir, adapterDir);
  return {
    check: name,
    status: r.failures.length ? "FAIL" : "PASS",
    reason: r.failures.length ? r.failures.join("; ") : `all ${r.keys} weights (${r.pairs} pairs) placed by PEFT and by vLLM${r.multimodal ? " on the multimodal wrapper" : ""}`,
  };
}

/** The tasks a training run trained on and where that was read. */
export interface TrainerTasks {
  /** Task ids, sorted. */
  ids: string[];
  /** The task file they come from. */
  tasksFile: string;
  /** The file that said which they are (train_tasks.json, or the run's config). */
  source: string;
}

/**
 * The tasks a training run trained on, from its folder (where its train_log.jsonl is): the run's
 * train_tasks.json, else the same selection made again from the run's resolved config (`config.json`, or
 * the `train_config.json` a published adapter carries). Null when the folder has none of them (a TRL run).
 */
export function trainerTasks(runDir: string): TrainerTasks | null {
  const recorded = readRunTasks(runDir);
  if (recorded) return { ids: [...recorded.task_ids].sort(), tasksFile: recorded.tasks, source: join(runDir, RUN_TASKS_FILE) };
  const configPath = ["config.json", "train_config.json"].map((f) => join(runDir, f)).find((p) => existsSync(p));
  if (!configPath) return null;
  let cfg: Partial<RunSelection> & { tasks?: unknown; conversations?: unknown };
  try {
    cfg = JSON.parse(readFileSync(configPath, "utf8"));
  } catch (e) {
    throw new T2sError("bad_config", `${configPath}: not valid JSON (${(e as Error).message})`);
  }
  if (typeof cfg.tasks !== "string" || cfg.conversations) return null;
  const tasksFile = resolve(runDir, cfg.tasks);
  const band = cfg.band ? { ...cfg.band, rows: resolve(runDir, cfg.band.rows) } : null;
  const tasks = selectRunTasks(readTasks(tasksFile), { split: cfg.split ?? "train", band, limit: cfg.limit ?? null });
  return { ids: tasks.map((t) => t.id).sort(), tasksFile, source: configPath };
}

/** The tasks a serving check scores: the trainer's, all of them or a seeded sample. */
export interface ServedTasks {
  /** Task ids to score, sorted. */
  ids: string[];
  /** How many tasks the trainer trained on. */
  of: number;
  /** The seeded sample's size and seed; null when all the trainer's tasks are scored. */
  sample: { size: number; seed: number } | null;
  tasksFile: string;
  source: string;
}

/** The trainer's tasks to score: all of them when `size` is 0 or not below their number, else a seeded sample of `size`. */
export function servedTasks(trainer: TrainerTasks, size: number, seed: number): ServedTasks {
  const picked = sampleTaskIds(trainer.ids, size, seed);
  return { ids: picked.ids, of: trainer.ids.length, sample: picked.sample, tasksFile: trainer.tasksFile, source: trainer.source };
}

/** Says which tasks a serving check scores, e.g. "a seeded sample of 64 of the 255 tasks the trainer trained on (seed 0; from .../train_tasks.json)". */
export function describeServedTasks(t: ServedTasks): string {
  const which = t.sample ? `a seeded sample of ${t.sample.size} of the ${t.of} tasks the trainer trained on (seed ${t.sample.seed})` : `all ${t.of} tasks the trainer trained on`;
  return `${which}; from ${t.source}`;
}

/** Why the served rows are not on the tasks `expected` names, or null when they are exactly those. */
function coverageProblem(served: readonly ReportRow[], expected: ServedTasks): string | null {
  const want = new Set(expected.ids);
  const got = new Set(served.map((r) => String(r.task_id)));
  const missing = expected.ids.filter((id) => !got.has(id));
  const others = [...got].filter((id) => !want.has(id)).sort();
  if (missing.length === 0 && others.length === 0) return null;
  const scored = [...got].filter((id) => want.has(id)).length;
  return `the served rows cover ${scored} of the ${expected.ids.length} tasks to score (${describeServedTasks(expected)})` +
    (missing.length ? `; ${missing.length} missing (e.g. ${missing.slice(0, 3).join(", ")})` : "") +
    (others.length ? `; ${others.length} other tasks (e.g. ${others.slice(0, 3).join(", ")})` : "") +
    ": score the trainer's tasks (or the stated sample) so the two numbers are on the same prompts";
}

function mean(xs: number[]): number {
  return xs.length ? xs.reduce((a, b) => a + b, 0) / xs.length : 0;
}

/**
 * Compares the served score on training prompts with the trainer's own log: mean reward (and correct
 * rate) of the served rows against the mean of the trainer's last `lastSteps` records. PASS when the
 * reward gap is within `tolerance` (default 0.15: sampling noise of a few dozen episodes) and, given
 * `tasks` (the trainer's tasks or a seeded sample of them), the served rows are on exactly those tasks: a
 * score on other prompts than the trainer's differs for that reason alone. Without `tasks` the reason says
 * that the prompts may differ.
 */
export function checkTrainerAgreement(served: readonly ReportRow[], log: readonly TrainRecord[], opts: { lastSteps?: number; tolerance?: number; tasks?: ServedTasks } = {}): Check {
  const name = "served score matches the trainer's log";
  if (served.length === 0 || log.length === 0) return { check: name, status: "SKIP", reason: served.length === 0 ? "no served rows" : "no trainer log records" };
  const coverage = opts.tasks ? coverageProblem(served, opts.tasks) : null;
  if (coverage) return { check: name, status: "FAIL", reason: coverage };
  const last = log.slice(-(opts.lastSteps ?? 3));
  const logReward = mean(last.map((r) => (typeof r.reward_mean === "number" ? r.reward_mean : 0)));
  const hasCorrect = last.some((r) => typeof r.correct_rate === "number");
  const logCorrect = mean(last.map((r) => (typeof r.correct_rate === "number" ? r.correct_rate : 0)));
  const servedReward = mean(served.map((r) => (typeof r.reward === "number" ? r.reward : 0)));
  const servedCorrect = mean(served.map((r) => (isCorrect(r) ? 1 : 0)));
  const tol = opts.tolerance ?? 0.15;
  const gap = Math.abs(servedReward - logReward);
  const on = opts.tasks ? `on ${describeServedTasks(opts.tasks)}` : "on prompts that may not be the trainer's (its tasks are unknown: no train_tasks.json or config beside its log)";
  return {
    check: name,
    status: gap <= tol ? "PASS" : "FAIL",
    reason: `served reward ${f3(servedReward)} (correct ${f3(servedCorrect)}, ${served.length} rows) vs trainer ${f3(logReward)} (${hasCorrect ? `correct ${f3(logCorrect)}, ` : ""}last ${last.length} steps): gap ${f3(gap)} ${gap <= tol ? "<=" : ">"} ${tol}; ${on}`,
  };
}

function finalReply(r: ReportRow): string {
  const turns = (r.turns ?? []).filter((m) => m.role === "assistant");
  const t = turns[turns.length - 1];
  return t ? `${t.content ?? ""}${JSON.stringify(t.tool_calls ?? [])}` : "";
}

/** Checks that the adapter changes the model: on the same (task, sample) pairs, some replies must differ from the base's. */
export function checkAdapterNotNoop(adapterRows: readonly ReportRow[], baseRows: readonly ReportRow[]): Check {
  const name = "adapter is not a no-op";
  const base = new Map(baseRows.map((r) => [`${r.task_id}\u0000${r.sample}`, r]));
  let paired = 0;
  let differ = 0;
  for (const r of adapterRows) {
    const b = base.get(`${r.task_id}\u0000${r.sample}`);
    if (!b) continue;
    paired += 1;
    if (finalReply(r) !== finalReply(b)) differ += 1;
  }
  if (paired === 0) return { check: name, status: "SKIP", reason: "no (task, sample) pairs in both the adapter's and the base model's rows" };
  return {
    check: name,
    status: differ > 0 ? "PASS" : "FAIL",
    reason: differ > 0 ? `${differ} of ${paired} paired replies differ from the base model's` : `all ${paired} paired replies are identical to the base model's: the adapter was probably not applied`,
  };
}

/**
 * Checks that every graded row graded the intended assistant turn: the first reply for single-reply
 * episodes, the last turn (the final answer) for tool episodes. Rows that never answered (turn 0) are counted apart.
 */
export function checkGradedTurn(rows: readonly ReportRow[], style: "single" | "tool" = "single"): Check {
  const name = "every graded row used the intended turn";
  const graded = rows.filter((r) => (r.graded_turn ?? 0) > 0);
  if (graded.length === 0) return { check: name, status: "SKIP", reason: "no graded rows" };
  const wrong = graded.filter((r) => (style === "single" ? r.graded_turn !== 1 : r.graded_turn !== r.n_assistant_turns));
  const unanswered = rows.length - graded.length;
  const multi = style === "single" ? graded.filter((r) => (r.n_assistant_turns ?? 1) > 1).length : 0;
  return {
    check: name,
    status: wrong.length === 0 ? "PASS" : "FAIL",
    reason: (wrong.length === 0 ? `all ${graded.length} graded rows graded ${style === "single" ? "the first reply" : "the final turn"}` : `${wrong.length} of ${graded.length} rows graded another turn (e.g. task ${wrong[0].task_id} turn ${wrong[0].graded_turn} of ${wrong[0].n_assistant_turns})`) +
      (multi ? `; ${multi} single-reply rows had more than one assistant turn` : "") + (unanswered ? `; ${unanswered} rows never answered` : ""),
  };
}

/** Returns the checks as a table (check, status, reason). */
export function checksTable(checks: readonly Check[]): Table {
  return aq.from(checks.map((c) => ({ check: c.check, status: c.status, reason: c.reason })));
}

/** Returns the checks as HTML lines with PASS/FAIL coloured, plus one overall line. */
export function checksHtml(checks: readonly Check[]): string {
  const color = { PASS: "#2ca02c", FAIL: "#d62728", SKIP: "#7f7f7f" };
  const esc = (s: string) => s.replace(/&/g, "&amp;").replace(/</g, "&lt;");
  const failed = checks.filter((c) => c.status === "FAIL").length;
  const lines = checks.map((c) => `<div><strong style="color:${color[c.status]}">${c.status}</strong> ${esc(c.check)} — ${esc(c.reason)}</div>`);
  lines.push(`<div style="margin-top:6px"><strong>${failed ? `FAIL: ${failed} of ${checks.length} checks failed` : `PASS: ${checks.filter((c) => c.status === "PASS").length} passed, ${checks.filter((c) => c.status === "SKIP").length} skipped`}</strong></div>`);
  return `<div class="t2s-checks" data-t2s-table="serving-checks">${lines.join("\n")}</div>`;
}
