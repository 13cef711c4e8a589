/**
 * mulberry32, the one seeded generator behind every random choice of the kit (shop data, task authoring,
 * bootstraps, neighbor databases, training). Its whole state is one 32-bit integer, so a checkpoint can
 * store it, and the same seed gives the same stream on every machine.
 */

/** Advances a mulberry32 state once; returns the next state and a float in [0, 1). */
export function mulberry32Next(state: number): { state: number; value: number } {
  const next = (state + 0x6d2b79f5) >>> 0;
  let t = next;
  t = Math.imul(t ^ (t >>> 15), t | 1);
  t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
  return { state: next, value: ((t ^ (t >>> 14)) >>> 0) / 4294967296 };
}

/** Returns a generator of floats in [0, 1) seeded with `seed` (only its low 32 bits are used). */
export function mulberry32(seed: number): () => number {
  let state = seed >>> 0;
  return () => {
    const step = mulberry32Next(state);
    state = step.state;
    return step.value;
  };
}
