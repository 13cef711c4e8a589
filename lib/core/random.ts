/**
 * The kit's one seeded generator (mulberry32) behind every random choice: shop data, task authoring,
 * bootstraps and permutation tests, neighbor databases, LoRA and model init, sampling, training order.
 * Its whole state is one 32-bit integer, so a checkpoint can store it, and the same seed gives the same
 * stream on every machine. Every draw below takes exactly one or two `next()` values in a fixed order:
 * the pinned hashes of the shop database, the task sets, bootstraps and training runs depend on it.
 */

/** Advances a mulberry32 state once; returns the next state and a float in [0, 1). */
export function mulberry32Next(state: number): { state: number; value: number } {
  const next = (state + 0x6d2b79f5) >>> 0;
  let t = next;
  t = Math.imul(t ^ (t >>> 15), t | 1);
  t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
  return { state: next, value: ((t ^ (t >>> 14)) >>> 0) / 4294967296 };
}

/** A seeded stream of random numbers and the choices made from it. */
export class SeededRandom {
  private s: number;

  /** Only the low 32 bits of `seed` are used. */
  constructor(seed: number) {
    this.s = seed >>> 0;
  }

  /** A float in [0, 1). */
  next(): number {
    const step = mulberry32Next(this.s);
    this.s = step.state;
    return step.value;
  }

  /** An integer in [0, n). */
  below(n: number): number {
    return Math.floor(this.next() * n);
  }

  /** An integer in [lo, hi], both ends included. */
  between(lo: number, hi: number): number {
    return lo + Math.floor(this.next() * (hi - lo + 1));
  }

  /** True with probability p. */
  chance(p: number): boolean {
    return this.next() < p;
  }

  /** One element of a non-empty list. */
  pick<T>(items: readonly T[]): T {
    if (items.length === 0) throw new Error("pick from an empty list");
    return items[this.below(items.length)];
  }

  /** One element chosen with the given weights (same length as `items`). */
  weighted<T>(items: readonly T[], weights: readonly number[]): T {
    const total = weights.reduce((a, b) => a + b, 0);
    let r = this.next() * total;
    for (let i = 0; i < items.length; i++) {
      r -= weights[i];
      if (r < 0) return items[i];
    }
    return items[items.length - 1];
  }

  /** A shuffled copy of `items` (Fisher-Yates, from the last position down). */
  shuffle<T>(items: readonly T[]): T[] {
    const out = items.slice();
    for (let i = out.length - 1; i > 0; i--) {
      const j = this.below(i + 1);
      const t = out[i];
      out[i] = out[j];
      out[j] = t;
    }
    return out;
  }

  /** `n` distinct elements (or all of them when fewer), in random order. */
  sample<T>(items: readonly T[], n: number): T[] {
    return this.shuffle(items).slice(0, n);
  }

  /** A fresh 32-bit seed for a sub-task (sampling, init), drawn from this stream. */
  seed(): number {
    return Math.floor(this.next() * 4294967296) >>> 0;
  }

  /** A standard normal draw (Box-Muller, two draws). */
  normal(): number {
    const u = 1 - this.next();
    return Math.sqrt(-2 * Math.log(u)) * Math.cos(2 * Math.PI * this.next());
  }

  /** The state to store in a checkpoint. */
  state(): number {
    return this.s;
  }

  /** Restores a state returned by `state()`. */
  setState(s: number): void {
    this.s = s >>> 0;
  }
}

/** A source of uniform floats in [0, 1), for code that only ever needs `next()` (e.g. a sampler). */
export type Uniform = () => number;

/** The `next()` of a fresh `SeededRandom(seed)` as a plain function. */
export function mulberry32(seed: number): Uniform {
  const r = new SeededRandom(seed);
  return () => r.next();
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
