/**
 * The trainer's seeded random numbers (mulberry32). Its whole state is one 32-bit integer, so a checkpoint
 * can store it and `--resume` continues the exact same draws.
 */
import { mulberry32Next } from "../core/random.js";
export class Rng {
  private s: number;
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
  int(n: number): number {
    return Math.floor(this.next() * n);
  }
  /** A fresh 32-bit seed for a sub-task (sampling, init), drawn from this stream. */
  seed(): number {
    return Math.floor(this.next() * 4294967296) >>> 0;
  }
  /** A shuffled copy of `items` (Fisher-Yates). */
  shuffle<T>(items: readonly T[]): T[] {
    const out = items.slice();
    for (let i = out.length - 1; i > 0; i--) {
      const j = this.int(i + 1);
      [out[i], out[j]] = [out[j], out[i]];
    }
    return out;
  }
  /** A standard normal draw (Box-Muller). */
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
