/**
 * Retries with exponential backoff and jitter. The jitter is a deterministic function of a seed key and the
 * attempt number, so a run is reproducible while concurrent requests still spread out instead of
 * retrying in lock-step.
 */
import { PolicyError } from "./types.js";

export interface RetryOptions {
  /** Retries after the first attempt (default 6). */
  retries?: number;
  /** Delay before the first retry in ms (default 1000); doubles each time. */
  baseMs?: number;
  /** Longest single delay in ms (default 60000). */
  maxMs?: number;
  /** Seeds the jitter. */
  jitterKey?: string;
  onRetry?: (reason: string, attempt: number) => void;
  signal?: AbortSignal;
}

/** A 32-bit FNV-1a hash of a string. */
export function fnv1a(text: string): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < text.length; i++) {
    h ^= text.charCodeAt(i);
    h = Math.imul(h, 0x01000193);
  }
  return h >>> 0;
}

/** The delay before retry number `attempt` (1-based): base * 2^(attempt-1), capped, times a jitter in [0.5, 1). */
export function backoffDelay(attempt: number, opts: Pick<RetryOptions, "baseMs" | "maxMs" | "jitterKey"> = {}): number {
  const base = opts.baseMs ?? 1000;
  const cap = opts.maxMs ?? 60_000;
  const raw = Math.min(cap, base * 2 ** (attempt - 1));
  const jitter = 0.5 + 0.5 * (fnv1a(`${opts.jitterKey ?? ""}#${attempt}`) / 4294967296);
  return Math.round(raw * jitter);
}

/** Resolves after `ms`, or rejects early when `signal` aborts. */
export function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) return reject(signal.reason ?? new Error("aborted"));
    const timer = setTimeout(() => {
      signal?.removeEventListener("abort", onAbort);
      resolve();
    }, ms);
    const onAbort = () => {
      clearTimeout(timer);
      reject(signal?.reason ?? new Error("aborted"));
    };
    signal?.addEventListener("abort", onAbort, { once: true });
  });
}

/**
 * Runs `attempt` until it succeeds or throws a non-retryable error; a retryable PolicyError is retried up to
 * `retries` times. Returns the first success; rethrows the last error when retries run out.
 */
export async function withRetries<T>(attempt: (n: number) => Promise<T>, opts: RetryOptions = {}): Promise<T> {
  const retries = opts.retries ?? 6;
  for (let n = 0; ; n++) {
    try {
      return await attempt(n);
    } catch (e) {
      if (!(e instanceof PolicyError) || !e.retryable || n >= retries || opts.signal?.aborted) throw e;
      opts.onRetry?.(e.reason, n + 1);
      // a server's Retry-After wins when it asks for longer than our own backoff (capped like it)
      const wait = Math.max(backoffDelay(n + 1, opts), Math.min(e.retryAfterMs ?? 0, opts.maxMs ?? 60_000));
      await sleep(wait, opts.signal);
    }
  }
}
