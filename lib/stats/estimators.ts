/**
 * Per-task estimators over n samples of which c are correct (Chen et al. 2021 for pass@k). Both k-way
 * numbers are written as products of ratios instead of binomial coefficients, so n = 200 or 2000 never
 * overflows and never loses precision to cancellation of huge numbers.
 */
import { T2sError } from "../core/errors.js";

function checkCounts(n: number, c: number, k: number): void {
  if (!Number.isInteger(n) || !Number.isInteger(c) || !Number.isInteger(k) || n < 1 || c < 0 || c > n || k < 1 || k > n) {
    throw new T2sError("bad_counts", `need integers 1 <= k <= n and 0 <= c <= n, got n=${n} c=${c} k=${k}`);
  }
}

/** Returns c/n, the task's pass@1. */
export function passAt1(n: number, c: number): number {
  checkCounts(n, c, 1);
  return c / n;
}

/**
 * Returns pass@k = 1 - C(n-c, k) / C(n, k): the chance that at least one of k samples drawn without
 * replacement from the n is correct. Computed as 1 - prod_{i=n-c+1..n} (1 - k/i).
 */
export function passAtK(n: number, c: number, k: number): number {
  checkCounts(n, c, k);
  if (n - c < k) return 1;
  let allWrong = 1;
  for (let i = n - c + 1; i <= n; i++) allWrong *= 1 - k / i;
  return 1 - allWrong;
}

/**
 * Returns pass^k = C(c, k) / C(n, k): the chance that all of k samples drawn without replacement from
 * the n are correct. Computed as prod_{j=0..k-1} (c-j)/(n-j).
 */
export function passPowK(n: number, c: number, k: number): number {
  checkCounts(n, c, k);
  if (c < k) return 0;
  let allRight = 1;
  for (let j = 0; j < k; j++) allRight *= (c - j) / (n - j);
  return allRight;
}

/** Returns the arithmetic mean of `xs`, or null for an empty list. */
export function mean(xs: ArrayLike<number>): number | null {
  if (xs.length === 0) return null;
  let s = 0;
  for (let i = 0; i < xs.length; i++) s += xs[i];
  return s / xs.length;
}

/** Returns the sample standard deviation (n - 1 in the denominator), or null below two values. */
export function sampleSd(xs: ArrayLike<number>): number | null {
  if (xs.length < 2) return null;
  const m = mean(xs) as number;
  let ss = 0;
  for (let i = 0; i < xs.length; i++) ss += (xs[i] - m) * (xs[i] - m);
  return Math.sqrt(ss / (xs.length - 1));
}
