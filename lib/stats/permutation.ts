/**
 * Two-sided sign-flip permutation test of "the mean paired difference is zero": under the null every
 * difference is as likely to have either sign, so p = share of sign assignments whose |sum| is at least
 * the observed |sum|. Exact (all 2^m assignments of the m non-zero differences, counted by meeting in
 * the middle) when m <= 32; otherwise Monte Carlo with (extreme + 1) / (P + 1).
 */
import { SeededRandom } from "../core/random.js";

export const EXACT_MAX_NONZERO = 32;
export const DEFAULT_PERMUTATIONS = 10000;

export interface SignFlipOptions {
  /** Random sign assignments when the exact test is too big (default 10000). */
  permutations?: number;
  seed?: number;
  /** Largest number of non-zero differences tested exactly (default 32). */
  exactMax?: number;
}

export interface SignFlipResult {
  p: number;
  exact: boolean;
  /** Sign assignments behind p: 2^m when exact, else the number of random ones. */
  assignments: number;
}

/** All 2^m signed sums ±x_1 ± ... ± x_m. */
function signedSums(xs: readonly number[]): Float64Array {
  let sums = new Float64Array([0]);
  for (const x of xs) {
    const next = new Float64Array(sums.length * 2);
    for (let i = 0; i < sums.length; i++) {
      next[2 * i] = sums[i] + x;
      next[2 * i + 1] = sums[i] - x;
    }
    sums = next;
  }
  return sums;
}

/** Number of entries of the ascending `sorted` that are >= v. */
function countAtLeast(sorted: Float64Array, v: number): number {
  let lo = 0;
  let hi = sorted.length;
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    if (sorted[mid] >= v) hi = mid;
    else lo = mid + 1;
  }
  return sorted.length - lo;
}

/** Number of entries of the ascending `sorted` that are <= v. */
function countAtMost(sorted: Float64Array, v: number): number {
  let lo = 0;
  let hi = sorted.length;
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    if (sorted[mid] <= v) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

/** Returns the two-sided sign-flip p-value of the paired differences `diffs`. */
export function signFlipTest(diffs: readonly number[], opts: SignFlipOptions = {}): SignFlipResult {
  const nonzero = diffs.filter((d) => d !== 0);
  const m = nonzero.length;
  const observed = Math.abs(nonzero.reduce((s, d) => s + d, 0));
  const scale = nonzero.reduce((s, d) => s + Math.abs(d), 0);
  // sums equal to the observed one but added in another order may differ in the last bits
  const threshold = observed - 1e-9 * Math.max(1, scale);
  if (m === 0 || threshold <= 0) return { p: 1, exact: true, assignments: 2 ** m };
  if (m <= (opts.exactMax ?? EXACT_MAX_NONZERO)) {
    const half = m >> 1;
    const left = signedSums(nonzero.slice(0, half));
    const right = signedSums(nonzero.slice(half)).sort();
    let extreme = 0;
    for (let i = 0; i < left.length; i++) {
      // right + left >= threshold, or right + left <= -threshold
      extreme += countAtLeast(right, threshold - left[i]);
      extreme += countAtMost(right, -threshold - left[i]);
    }
    return { p: extreme / 2 ** m, exact: true, assignments: 2 ** m };
  }
  const P = opts.permutations ?? DEFAULT_PERMUTATIONS;
  const rand = new SeededRandom(opts.seed ?? 0);
  let extreme = 0;
  const values = Float64Array.from(nonzero);
  for (let b = 0; b < P; b++) {
    let s = 0;
    let bits = 0;
    for (let i = 0; i < m; i++) {
      // one draw gives 32 fair signs (mulberry32 outputs are k / 2^32, so this recovers its 32 bits)
      if ((i & 31) === 0) bits = rand.seed();
      s += bits & 1 ? values[i] : -values[i];
      bits >>>= 1;
    }
    if (Math.abs(s) >= threshold) extreme++;
  }
  return { p: (extreme + 1) / (P + 1), exact: false, assignments: P };
}
