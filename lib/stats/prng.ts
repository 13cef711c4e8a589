/**
 * The seeded pseudo-random numbers behind every interval and permutation test in lib/stats. mulberry32 is
 * small, fast and good enough for resampling; what matters here is that the same seed gives the same
 * stream on every machine, so a reported interval can be reproduced exactly.
 */

import { mulberry32 } from "../core/random.js";

export { mulberry32 };

/** A generator of uniform numbers in [0, 1). */
export type Random = () => number;

/** Returns a uniform integer in [0, n) drawn from `rand`. */
export function randomIndex(rand: Random, n: number): number {
  return Math.floor(rand() * n);
}

/**
 * Returns a seed for an independent stream derived from `seed` and a stream number, so that e.g. the
 * permutation test does not reuse the bootstrap's draws.
 */
export function deriveSeed(seed: number, stream: number): number {
  let h = (seed ^ Math.imul(stream + 1, 0x9e3779b9)) >>> 0;
  h = Math.imul(h ^ (h >>> 16), 0x85ebca6b) >>> 0;
  h = Math.imul(h ^ (h >>> 13), 0xc2b2ae35) >>> 0;
  return (h ^ (h >>> 16)) >>> 0;
}
