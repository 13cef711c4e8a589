/**
 * The environment service's share of grading among its clients: at most `limit` jobs run at once, and when a
 * place frees up it goes to the next client in turn (round robin over the clients with jobs waiting), not to
 * the oldest job. A client that sends 64 slow items therefore delays another client's one item by at most one
 * job's time per place, not by all 64. A waiting job whose signal aborts (its client went away) leaves the
 * queue at once, without ever running.
 */
import { T2sError } from "../core/errors.js";

interface Waiter {
  start: () => void;
  /** Left the queue (its signal aborted) before its turn. */
  gone: boolean;
}

/** A counting semaphore whose waiting jobs are served one client at a time, in turn. */
export class FairLimiter {
  private active = 0;
  /** Waiting jobs per client; a client's place in the map is its turn (served: moved to the end). */
  private readonly queues = new Map<unknown, Waiter[]>();
  private waiting = 0;

  constructor(readonly limit: number) {
    if (!Number.isInteger(limit) || limit < 1) throw new RangeError(`concurrency limit must be an integer >= 1, got ${limit}`);
  }

  /**
   * Runs `job` for `client` (any value that tells clients apart: a connection, a key) once a place is free
   * and it is that client's turn; rejects with T2sError("cancelled") if `signal` aborts first.
   */
  async run<T>(client: unknown, job: () => Promise<T>, signal?: AbortSignal): Promise<T> {
    if (signal?.aborted) throw new T2sError("cancelled", "the client went away before its turn");
    if (this.active >= this.limit || this.waiting > 0) await this.wait(client, signal);
    else this.active++;
    try {
      return await job();
    } finally {
      this.active--;
      this.next();
    }
  }

  /** Jobs running now. */
  get running(): number {
    return this.active;
  }

  /** Jobs waiting for their turn. */
  get queued(): number {
    return this.waiting;
  }

  private wait(client: unknown, signal: AbortSignal | undefined): Promise<void> {
    return new Promise<void>((resolve, reject) => {
      const w: Waiter = {
        gone: false,
        start: () => {
          signal?.removeEventListener("abort", leave);
          resolve();
        },
      };
      const leave = () => {
        w.gone = true;
        this.waiting--;
        reject(new T2sError("cancelled", "the client went away before its turn"));
      };
      signal?.addEventListener("abort", leave, { once: true });
      const q = this.queues.get(client);
      if (q) q.push(w);
      else this.queues.set(client, [w]);
      this.waiting++;
      this.next();
    });
  }

  /** Starts waiting jobs while places are free, one client at a time in turn. */
  private next(): void {
    while (this.active < this.limit && this.queues.size > 0) {
      const [client, q] = this.queues.entries().next().value as [unknown, Waiter[]];
      const w = q.shift() as Waiter;
      // served (or emptied): to the back of the turn order, or out of it
      this.queues.delete(client);
      if (q.length > 0) this.queues.set(client, q);
      if (w.gone) continue;
      this.waiting--;
      this.active++;
      w.start();
    }
  }
}
