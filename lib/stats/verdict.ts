/**
 * The verdict of a paired comparison: a conservative word for what the evidence supports. The rules
 * (docs/statistics.md) in order:
 * 1. fewer than 5 paired tasks -> insufficient_data;
 * 2. at least 2 eval runs on each side: |delta| inside the eval-noise band -> within_eval_noise;
 *    else interval above 0 -> moved, below 0 -> moved_the_wrong_way, else no_change_detected;
 * 3. fewer runs: interval above 0 -> moved_unreplicated, below 0 -> moved_the_wrong_way, else
 *    no_change_detected.
 */
import type { Interval } from "./bootstrap.js";
import { studentTQuantile } from "./distributions.js";

export type Verdict =
  | "insufficient_data"
  | "within_eval_noise"
  | "moved"
  | "moved_unreplicated"
  | "moved_the_wrong_way"
  | "no_change_detected";

/** Fewest paired tasks a verdict other than insufficient_data needs. */
export const MIN_PAIRED_TASKS = 5;
/** Fewest eval runs per side for a run-to-run noise band. */
export const MIN_RUNS_FOR_BAND = 2;

/** The eval-noise band and what it was made from. */
export interface NoiseBand {
  /** q * run_sd * sqrt(1/runs_a + 1/runs_b). */
  band: number;
  /** t quantile at 0.975 for df degrees of freedom. */
  q: number;
  /** (runs_a - 1) + (runs_b - 1). */
  df: number;
  /** Pooled run-to-run standard deviation of per-run pass@1. */
  run_sd: number;
  runs_a: number;
  runs_b: number;
}

function sumSquares(xs: readonly number[]): number {
  const m = xs.reduce((s, x) => s + x, 0) / xs.length;
  return xs.reduce((s, x) => s + (x - m) * (x - m), 0);
}

/**
 * Returns the noise band from each side's per-run pass@1 values, or null unless both sides have at
 * least 2 runs. run_sd pools the two sides' within-side variances: sqrt((SS_a + SS_b) / df).
 */
export function noiseBand(runPass1A: readonly number[], runPass1B: readonly number[], confidence = 0.95): NoiseBand | null {
  const ra = runPass1A.length;
  const rb = runPass1B.length;
  if (ra < MIN_RUNS_FOR_BAND || rb < MIN_RUNS_FOR_BAND) return null;
  const df = ra - 1 + (rb - 1);
  const runSd = Math.sqrt((sumSquares(runPass1A) + sumSquares(runPass1B)) / df);
  const q = studentTQuantile(1 - (1 - confidence) / 2, df);
  return { band: q * runSd * Math.sqrt(1 / ra + 1 / rb), q, df, run_sd: runSd, runs_a: ra, runs_b: rb };
}

export interface VerdictInput {
  n_paired: number;
  delta: number | null;
  ci: Interval | null;
  /** The noise band, or null when either side has fewer than 2 eval runs. */
  band: number | null;
}

/** Returns the verdict word for a paired comparison (see the rules at the top of this file). */
export function verdictFor(input: VerdictInput): Verdict {
  const { n_paired, delta, ci, band } = input;
  if (n_paired < MIN_PAIRED_TASKS || delta === null || ci === null) return "insufficient_data";
  if (band !== null) {
    if (Math.abs(delta) < band) return "within_eval_noise";
    if (ci[0] > 0) return "moved";
    if (ci[1] < 0) return "moved_the_wrong_way";
    return "no_change_detected";
  }
  if (ci[0] > 0) return "moved_unreplicated";
  if (ci[1] < 0) return "moved_the_wrong_way";
  return "no_change_detected";
}
