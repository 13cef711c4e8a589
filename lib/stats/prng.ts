/**
 * The seeded pseudo-random numbers behind every interval and permutation test in lib/stats. mulberry32 is
 * small, fast and good enough for resampling; what matters here is that the same seed gives the same
 * stream on every machine, so a reported interval can be reproduced exactly.
 */

/** A generator of uniform numbers in [0, 1). */
export type Random = () => number;

/** Returns a mulberry32 generator seeded with `seed` (any integer; only its low 32 bits are used). */
export function mulberry32(seed: number): Random {
  let state = seed >>> 0;
  return () => {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

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
