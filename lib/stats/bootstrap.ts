/**
 * Percentile bootstrap over tasks: resample the per-task values with replacement B times, take the mean
 * of each resample, and read the interval off the sorted means. The interval is
 * [sorted[floor(alpha/2 * B)], sorted[floor((1 - alpha/2) * B) - 1]] (for B = 2000: the 51st and the
 * 1950th of 2000).
 */
import { SeededRandom } from "../core/random.js";

export interface BootstrapOptions {
  /** Resamples (default 2000). */
  B?: number;
  /** PRNG seed (default 0). */
  seed?: number;
  /** Coverage of the interval (default 0.95). */
  level?: number;
  /** Fewest values an interval is given for (default 3): below it the bootstrap says nothing useful. */
  minN?: number;
}

export const DEFAULT_B = 2000;
export const DEFAULT_SEED = 0;
export const MIN_BOOTSTRAP_N = 3;

/** An interval [lo, hi]. */
export type Interval = [number, number];

/** Returns the B bootstrap means of `values`, sorted ascending. */
export function bootstrapMeans(values: ArrayLike<number>, B = DEFAULT_B, seed = DEFAULT_SEED): Float64Array {
  const xs = Float64Array.from(values as ArrayLike<number>);
  const n = xs.length;
  const means = new Float64Array(B);
  if (n === 0) return means.fill(NaN);
  const rand = new SeededRandom(seed);
  for (let b = 0; b < B; b++) {
    let s = 0;
    for (let i = 0; i < n; i++) s += xs[rand.below(n)];
    means[b] = s / n;
  }
  return means.sort();
}

/** Returns the positions in B sorted resamples that bound a two-sided interval of coverage `level`. */
export function percentileIndices(B: number, level = 0.95): [number, number] {
  const alpha = 1 - level;
  const lo = Math.min(B - 1, Math.floor((alpha / 2) * B + 1e-9));
  const hi = Math.max(lo, Math.min(B - 1, Math.floor((1 - alpha / 2) * B + 1e-9) - 1));
  return [lo, hi];
}

/**
 * Returns the percentile bootstrap interval of the mean of `values`, or null when there are fewer than
 * `minN` values. Deterministic: the same values in the same order and the same seed give the same interval.
 */
export function bootstrapCI(values: ArrayLike<number>, opts: BootstrapOptions = {}): Interval | null {
  const B = opts.B ?? DEFAULT_B;
  if (values.length < (opts.minN ?? MIN_BOOTSTRAP_N) || values.length === 0) return null;
  const means = bootstrapMeans(values, B, opts.seed ?? DEFAULT_SEED);
  const [lo, hi] = percentileIndices(B, opts.level ?? 0.95);
  return [means[lo], means[hi]];
}
