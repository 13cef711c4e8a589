/**
 * The few distribution functions the verdict and power rules need: Student t and standard normal CDFs
 * and quantiles. Written here (log-gamma by Lanczos, regularized incomplete beta and gamma by series and
 * continued fractions, quantiles by bisection on the CDF) so results do not depend on a package and are
 * accurate to about 1e-12, far beyond what a verdict can be sensitive to.
 */
import { T2sError } from "../core/errors.js";

const LANCZOS_G = 7;
const LANCZOS = [
  0.99999999999980993, 676.5203681218851, -1259.1392167224028, 771.32342877765313, -176.61502916214059,
  12.507343278686905, -0.13857109526572012, 9.9843695780195716e-6, 1.5056327351493116e-7,
];

/** Returns ln Γ(x) for x > 0. */
export function logGamma(x: number): number {
  if (!(x > 0)) throw new T2sError("bad_argument", `logGamma needs x > 0, got ${x}`);
  if (x < 0.5) {
    // reflection keeps the Lanczos series in the range where it is accurate
    return Math.log(Math.PI / Math.sin(Math.PI * x)) - logGamma(1 - x);
  }
  const z = x - 1;
  let a = LANCZOS[0];
  const t = z + LANCZOS_G + 0.5;
  for (let i = 1; i < LANCZOS.length; i++) a += LANCZOS[i] / (z + i);
  return 0.5 * Math.log(2 * Math.PI) + (z + 0.5) * Math.log(t) - t + Math.log(a);
}

const EPS = 1e-16;
const TINY = 1e-300;
const MAX_ITER = 10000;

/** Continued fraction for the incomplete beta (modified Lentz), valid for x < (a+1)/(a+b+2). */
function betaContinuedFraction(x: number, a: number, b: number): number {
  let c = 1;
  let d = 1 - ((a + b) * x) / (a + 1);
  if (Math.abs(d) < TINY) d = TINY;
  d = 1 / d;
  let h = d;
  for (let m = 1; m <= MAX_ITER; m++) {
    const m2 = 2 * m;
    let aa = (m * (b - m) * x) / ((a + m2 - 1) * (a + m2));
    d = 1 + aa * d;
    if (Math.abs(d) < TINY) d = TINY;
    c = 1 + aa / c;
    if (Math.abs(c) < TINY) c = TINY;
    d = 1 / d;
    h *= d * c;
    aa = (-(a + m) * (a + b + m) * x) / ((a + m2) * (a + m2 + 1));
    d = 1 + aa * d;
    if (Math.abs(d) < TINY) d = TINY;
    c = 1 + aa / c;
    if (Math.abs(c) < TINY) c = TINY;
    d = 1 / d;
    const step = d * c;
    h *= step;
    if (Math.abs(step - 1) < EPS) return h;
  }
  return h;
}

/** Returns the regularized incomplete beta function I_x(a, b) for a, b > 0 and 0 <= x <= 1. */
export function regularizedBeta(x: number, a: number, b: number): number {
  if (!(a > 0) || !(b > 0) || !(x >= 0 && x <= 1)) {
    throw new T2sError("bad_argument", `regularizedBeta needs a, b > 0 and 0 <= x <= 1, got x=${x} a=${a} b=${b}`);
  }
  if (x === 0) return 0;
  if (x === 1) return 1;
  const logFront = logGamma(a + b) - logGamma(a) - logGamma(b) + a * Math.log(x) + b * Math.log1p(-x);
  const front = Math.exp(logFront);
  if (x < (a + 1) / (a + b + 2)) return (front * betaContinuedFraction(x, a, b)) / a;
  return 1 - (front * betaContinuedFraction(1 - x, b, a)) / b;
}

/** Returns the regularized lower incomplete gamma function P(a, x) for a > 0, x >= 0. */
export function regularizedGammaP(a: number, x: number): number {
  if (!(a > 0) || !(x >= 0)) throw new T2sError("bad_argument", `regularizedGammaP needs a > 0, x >= 0, got a=${a} x=${x}`);
  if (x === 0) return 0;
  const logFront = a * Math.log(x) - x - logGamma(a);
  if (x < a + 1) {
    let term = 1 / a;
    let sum = term;
    for (let n = 1; n <= MAX_ITER; n++) {
      term *= x / (a + n);
      sum += term;
      if (Math.abs(term) < Math.abs(sum) * EPS) break;
    }
    return sum * Math.exp(logFront);
  }
  return 1 - regularizedGammaQ(a, x);
}

/** Returns the regularized upper incomplete gamma function Q(a, x) = 1 - P(a, x). */
export function regularizedGammaQ(a: number, x: number): number {
  if (x < a + 1) return 1 - regularizedGammaP(a, x);
  const logFront = a * Math.log(x) - x - logGamma(a);
  let b = x + 1 - a;
  let c = 1 / TINY;
  let d = 1 / b;
  let h = d;
  for (let i = 1; i <= MAX_ITER; i++) {
    const an = -i * (i - a);
    b += 2;
    d = an * d + b;
    if (Math.abs(d) < TINY) d = TINY;
    c = b + an / c;
    if (Math.abs(c) < TINY) c = TINY;
    d = 1 / d;
    const step = d * c;
    h *= step;
    if (Math.abs(step - 1) < EPS) break;
  }
  return Math.exp(logFront) * h;
}

/** P(Z > z) for z >= 0. */
function normalUpperTail(z: number): number {
  return 0.5 * regularizedGammaQ(0.5, (z * z) / 2);
}

/** P(T > t) for t >= 0. */
function studentTUpperTail(t: number, df: number): number {
  return 0.5 * regularizedBeta(df / (df + t * t), df / 2, 0.5);
}

/** Returns P(Z <= z) for a standard normal Z. */
export function normalCdf(z: number): number {
  if (Number.isNaN(z)) return NaN;
  if (z === Infinity) return 1;
  if (z === -Infinity) return 0;
  const tail = normalUpperTail(Math.abs(z));
  return z >= 0 ? 1 - tail : tail;
}

/** Returns P(T <= t) for Student's t with `df` > 0 degrees of freedom. */
export function studentTCdf(t: number, df: number): number {
  if (!(df > 0)) throw new T2sError("bad_argument", `the t distribution needs df > 0, got ${df}`);
  if (Number.isNaN(t)) return NaN;
  if (t === Infinity) return 1;
  if (t === -Infinity) return 0;
  const tail = studentTUpperTail(Math.abs(t), df);
  return t >= 0 ? 1 - tail : tail;
}

/**
 * Finds x with P(X <= x) = p for a distribution symmetric about 0, given its upper tail P(X > x) for
 * x >= 0, by bracketing and bisection. Working on the tail keeps precision for p near 0 or 1.
 */
function symmetricQuantile(p: number, tailAbove: (x: number) => number, what: string): number {
  if (!(p > 0 && p < 1)) throw new T2sError("bad_argument", `${what} quantile needs 0 < p < 1, got ${p}`);
  if (p === 0.5) return 0;
  const upper = p > 0.5;
  const tailP = upper ? 1 - p : p;
  let hi = 1;
  while (tailAbove(hi) > tailP) {
    hi *= 2;
    if (hi > 1e300) break;
  }
  let lo = 0;
  for (let i = 0; i < 2000 && hi - lo > 1e-15 * Math.max(1, hi); i++) {
    const mid = 0.5 * (lo + hi);
    if (tailAbove(mid) > tailP) lo = mid;
    else hi = mid;
  }
  const x = 0.5 * (lo + hi);
  return upper ? x : -x;
}

/** Returns the p-quantile of the standard normal distribution (normalQuantile(0.975) = 1.95996...). */
export function normalQuantile(p: number): number {
  return symmetricQuantile(p, normalUpperTail, "normal");
}

/** Returns the p-quantile of Student's t with `df` degrees of freedom (studentTQuantile(0.975, 4) = 2.7764...). */
export function studentTQuantile(p: number, df: number): number {
  if (!(df > 0)) throw new T2sError("bad_argument", `the t distribution needs df > 0, got ${df}`);
  return symmetricQuantile(p, (x) => studentTUpperTail(x, df), "t");
}
