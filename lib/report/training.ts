/**
 * Training curves from a trainer's train_log.jsonl (one record per step): reward, frac_reward_zero_std,
 * KL, entropy, completion length and clip ratio, each in its own panel, plus holdout checkpoints
 * (eval_pass1) when the log has them.
 */
import { existsSync, readFileSync } from "node:fs";
import { T2sError } from "../core/errors.js";
import type { PlotlyFigure } from "./display.js";

export type TrainRecord = Record<string, unknown> & { step?: number };

/**
 * Reads a train log's step records; a cut-off last line (a trainer still writing) is ignored, other bad
 * lines throw. Event records (`{"event": "config_changed", "at_step": N, ...}`, written when a run was
 * resumed with --force under a changed config) are left out unless `events` is set.
 */
export function readTrainLog(path: string, opts: { events?: boolean } = {}): TrainRecord[] {
  if (!existsSync(path)) throw new T2sError("not_found", `train log ${path} does not exist`);
  const lines = readFileSync(path, "utf8").split("\n");
  const out: TrainRecord[] = [];
  lines.forEach((line, i) => {
    if (line.trim() === "") return;
    try {
      const record = JSON.parse(line) as TrainRecord;
      if (opts.events || record === null || typeof record !== "object" || record.event === undefined) out.push(record);
    } catch {
      if (i === lines.length - 1) return; // a line being written right now
      throw new T2sError("bad_log", `${path}:${i + 1}: not JSON`);
    }
  });
  return out;
}

/** The panels of the training-curves figure: title and the log fields drawn in it (first present wins per panel). */
export const TRAIN_PANELS: Array<{ title: string; fields: string[] }> = [
  { title: "reward", fields: ["reward_mean", "reward", "correct_rate"] },
  { title: "frac_reward_zero_std", fields: ["frac_reward_zero_std"] },
  { title: "KL", fields: ["kl"] },
  { title: "entropy", fields: ["entropy"] },
  { title: "completion length", fields: ["completion_length_mean"] },
  { title: "clip ratio", fields: ["clip_ratio_region", "clip_ratio_low", "clip_ratio_high"] },
];

function num(v: unknown): number | null {
  return typeof v === "number" && Number.isFinite(v) ? v : null;
}

/**
 * Returns a 2 x 3 grid of line plots, one per TRAIN_PANELS entry, against the step; all fields of a panel
 * that the log has are drawn. Holdout checkpoints (eval_pass1) are drawn as markers in the reward panel.
 */
export function trainingCurvesFigure(records: readonly TrainRecord[], title = "Training curves"): PlotlyFigure {
  const steps = records.map((r, i) => num(r.step) ?? i);
  const data: Array<Record<string, unknown>> = [];
  const layout: Record<string, unknown> = {
    title: { text: title }, font: { family: "Helvetica, Arial, sans-serif", size: 12 }, height: 560, showlegend: true,
    grid: { rows: 2, columns: 3, pattern: "independent" }, margin: { l: 60, r: 20, t: 70, b: 50 }, annotations: [] as unknown[],
  };
  TRAIN_PANELS.forEach((panel, i) => {
    const axis = i === 0 ? "" : String(i + 1);
    for (const field of panel.fields) {
      const ys = records.map((r) => num(r[field]));
      if (ys.every((y) => y === null)) continue;
      data.push({ type: "scatter", mode: "lines+markers", name: field, x: steps, y: ys, xaxis: `x${axis}`, yaxis: `y${axis}`, marker: { size: 4 } });
    }
    if (i === 0) {
      const evals = records.map((r, j) => [steps[j], num(r.eval_pass1)] as const).filter(([, y]) => y !== null);
      if (evals.length) data.push({ type: "scatter", mode: "markers", name: "holdout pass@1", x: evals.map((e) => e[0]), y: evals.map((e) => e[1]), xaxis: "x", yaxis: "y", marker: { size: 10, symbol: "star", color: "#d62728" } });
    }
    layout[`xaxis${axis}`] = { title: { text: "step" } };
    layout[`yaxis${axis}`] = { title: { text: panel.title } };
  });
  return { data, layout };
}

/** Returns the last record's numbers of each panel plus step count, for a one-line progress text. */
export function trainProgressLine(records: readonly TrainRecord[], totalSteps?: number): string {
  const last = records[records.length - 1];
  if (!last) return "no steps logged yet";
  const parts = [`step ${(num(last.step) ?? records.length - 1) + 1}${totalSteps ? `/${totalSteps}` : ""}`];
  for (const p of TRAIN_PANELS) {
    const f = p.fields.find((x) => num(last[x]) !== null);
    if (f) parts.push(`${f} ${(num(last[f]) as number).toFixed(3)}`);
  }
  if (num(last.eval_pass1) !== null) parts.push(`holdout pass@1 ${(num(last.eval_pass1) as number).toFixed(3)}`);
  return parts.join(" | ");
}
