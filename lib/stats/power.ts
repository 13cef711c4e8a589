/**
 * What a paired comparison of this size can prove, by the two-sided normal approximation for a paired
 * mean difference: n = ((z_{1-alpha/2} + z_{power}) * sd / effect)^2, with sd the observed standard
 * deviation of the per-task differences. Defaults: 95% confidence, 80% power.
 */
import { normalQuantile } from "./distributions.js";
import { sampleSd } from "./estimators.js";

export interface PowerOptions {
  /** Two-sided confidence (default 0.95). */
  confidence?: number;
  /** Power (default 0.8). */
  power?: number;
}

/** Returns z_{1-alpha/2} + z_{power}: 1.95996 + 0.84162 = 2.80159 at the defaults. */
export function powerMultiplier(opts: PowerOptions = {}): number {
  const confidence = opts.confidence ?? 0.95;
  const power = opts.power ?? 0.8;
  return normalQuantile(1 - (1 - confidence) / 2) + normalQuantile(power);
}

/**
 * Returns the smallest |mean difference| detectable with `n` paired tasks whose differences have
 * standard deviation `sd`: (z + z) * sd / sqrt(n). Null when n < 2.
 */
export function detectableEffect(sd: number | null, n: number, opts: PowerOptions = {}): number | null {
  if (sd === null || n < 2) return null;
  return (powerMultiplier(opts) * sd) / Math.sqrt(n);
}

/**
 * Returns the number of paired tasks needed to detect a mean difference of `effect` with differences of
 * standard deviation `sd`: ceil(((z + z) * sd / |effect|)^2). Null when the effect is 0 or unknown.
 */
export function tasksNeeded(sd: number | null, effect: number | null, opts: PowerOptions = {}): number | null {
  if (sd === null || effect === null || effect === 0) return null;
  const n = ((powerMultiplier(opts) * sd) / Math.abs(effect)) ** 2;
  // guard against 94.00000000000001 becoming 95
  return Math.ceil(n - 1e-9);
}

/** Returns detectable effect and tasks needed for the paired differences `diffs` and their mean. */
export function pairedPower(diffs: readonly number[], opts: PowerOptions = {}): { sd: number | null; detectable_effect: number | null; tasks_needed: number | null } {
  const sd = sampleSd(diffs);
  const delta = diffs.length ? diffs.reduce((s, d) => s + d, 0) / diffs.length : null;
  return { sd, detectable_effect: detectableEffect(sd, diffs.length, opts), tasks_needed: tasksNeeded(sd, delta, opts) };
}
