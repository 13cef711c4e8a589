/**
 * The serving check: after training, does the served adapter behave like the trained one? Each check
 * returns PASS/FAIL (or SKIP when its inputs are missing) with the reason in numbers.
 */
import * as aq from "arquero";
import { isCorrect, type ReportRow } from "./rows.js";
import type { Table } from "./tables.js";
import type { TrainRecord } from "./training.js";

export interface Check {
  check: string;
  status: "PASS" | "FAIL" | "SKIP";
  reason: string;
}

const f3 = (x: number) => x.toFixed(3);

function mean(xs: number[]): number {
  return xs.length ? xs.reduce((a, b) => a + b, 0) / xs.length : 0;
}

/**
 * Compares the served score on training prompts with the trainer's own log: mean reward (and correct
 * rate) of the served rows against the mean of the trainer's last `lastSteps` records. PASS when the
 * reward gap is within `tolerance` (default 0.15: sampling noise of a few dozen episodes).
 */
export function checkTrainerAgreement(served: readonly ReportRow[], log: readonly TrainRecord[], opts: { lastSteps?: number; tolerance?: number } = {}): Check {
  const name = "served score matches the trainer's log";
  if (served.length === 0 || log.length === 0) return { check: name, status: "SKIP", reason: served.length === 0 ? "no served rows" : "no trainer log records" };
  const last = log.slice(-(opts.lastSteps ?? 3));
  const logReward = mean(last.map((r) => (typeof r.reward_mean === "number" ? r.reward_mean : 0)));
  const logCorrect = mean(last.map((r) => (typeof r.correct_rate === "number" ? r.correct_rate : 0)));
  const servedReward = mean(served.map((r) => (typeof r.reward === "number" ? r.reward : 0)));
  const servedCorrect = mean(served.map((r) => (isCorrect(r) ? 1 : 0)));
  const tol = opts.tolerance ?? 0.15;
  const gap = Math.abs(servedReward - logReward);
  return {
    check: name,
    status: gap <= tol ? "PASS" : "FAIL",
    reason: `served reward ${f3(servedReward)} (correct ${f3(servedCorrect)}, ${served.length} rows) vs trainer ${f3(logReward)} (correct ${f3(logCorrect)}, last ${last.length} steps): gap ${f3(gap)} ${gap <= tol ? "<=" : ">"} ${tol}`,
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
