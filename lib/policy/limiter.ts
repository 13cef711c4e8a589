/** A counting semaphore: at most `limit` async jobs run at once; the rest wait in arrival order. */
export class Limiter {
  private active = 0;
  private readonly queue: Array<() => void> = [];
  constructor(readonly limit: number) {
    if (!Number.isInteger(limit) || limit < 1) throw new RangeError(`concurrency limit must be an integer >= 1, got ${limit}`);
  }

  /** Runs `job` once a slot is free and returns its result. */
  async run<T>(job: () => Promise<T>): Promise<T> {
    if (this.active >= this.limit) await new Promise<void>((resolve) => this.queue.push(resolve));
    this.active++;
    try {
      return await job();
    } finally {
      this.active--;
      const next = this.queue.shift();
      if (next) next();
    }
  }

  /** Jobs running now. */
  get running(): number {
    return this.active;
  }
}
