/**
 * How both servers stop on a signal: the first SIGINT or SIGTERM stops admitting (new requests get a 503)
 * and lets what is in flight finish for up to the shutdown timeout; a second signal cuts it at once. One
 * line on stderr acknowledges each signal as it arrives (the servers never hold the event loop, so it is
 * printed at once whatever is queued).
 */

/** Seconds in-flight work may take after the first signal, by default, on both servers. */
export const SHUTDOWN_TIMEOUT_S = 30;

/** A server that drains: close(timeoutMs) waits for in-flight work that long, then cuts it; a later call may shorten the wait. */
export interface Drainable {
  close(timeoutMs?: number): Promise<void>;
  inFlight(): number;
}

export interface SignalOptions {
  /** Seconds in-flight work may take after the first signal. */
  timeoutSeconds: number;
  /** What is in flight, as the acknowledgement names it ("requests", "grades"). */
  what?: string;
  /** Where the acknowledgements go (default stderr). */
  log?: (line: string) => void;
}

/**
 * Resolves once the server has closed after SIGINT or SIGTERM (the first drains, a second cuts at once).
 * The listeners are removed when it resolves.
 */
export function serveUntilSignal(server: Drainable, opts: SignalOptions): Promise<void> {
  const log = opts.log ?? ((line: string) => process.stderr.write(`${line}\n`));
  const what = opts.what ?? "requests";
  return new Promise<void>((resolve, reject) => {
    let closing: Promise<void> | null = null;
    const onSignal = (signal: NodeJS.Signals) => {
      if (!closing) {
        log(`${signal}: no new ${what}; waiting up to ${opts.timeoutSeconds} s for ${server.inFlight()} in flight (a second signal cuts them now)`);
        closing = server.close(opts.timeoutSeconds * 1000);
        closing.then(
          () => {
            process.off("SIGINT", onSignal);
            process.off("SIGTERM", onSignal);
            resolve();
          },
          (e: unknown) => {
            process.off("SIGINT", onSignal);
            process.off("SIGTERM", onSignal);
            reject(e);
          },
        );
        return;
      }
      log(`${signal} again: cutting ${server.inFlight()} ${what} in flight now`);
      void server.close(0);
    };
    process.on("SIGINT", onSignal);
    process.on("SIGTERM", onSignal);
  });
}

/**
 * The wait of a draining close: resolves when nothing is in flight or the deadline passes, and a later
 * `cut(ms)` can only bring the deadline closer (a second signal's close(0) cuts at once).
 */
export class DrainDeadline {
  private deadline: number;
  private wake: (() => void) | null = null;
  private timer: NodeJS.Timeout | null = null;

  constructor(timeoutMs: number) {
    this.deadline = performance.now() + Math.max(0, timeoutMs);
  }

  /** Moves the deadline to `ms` from now if that is sooner. */
  cut(ms: number): void {
    this.deadline = Math.min(this.deadline, performance.now() + Math.max(0, ms));
    this.wake?.();
  }

  /** Whether the deadline has passed. */
  passed(): boolean {
    return performance.now() >= this.deadline;
  }

  /** Waits until `idle()` holds (checked every 20 ms) or the deadline passes, sooner after a cut. */
  async until(idle: () => boolean): Promise<void> {
    while (!idle() && !this.passed()) {
      await new Promise<void>((resolve) => {
        this.wake = resolve;
        this.timer = setTimeout(resolve, Math.min(20, Math.max(0, this.deadline - performance.now())));
      });
      if (this.timer) clearTimeout(this.timer);
      this.wake = null;
    }
  }
}
