/**
 * Progress of a rollout: rows landed out of the total, rate, ETA, re-rolls, and lost and refused episodes by reason.
 * Shown as a live line on stderr (rewritten in place on a terminal, a line every 10 s in a log) and
 * passed to a callback, throttled the same way, for notebooks.
 */
export interface ProgressSnapshot {
  /** Rows the run asks for (tasks x k). */
  total: number;
  /** Rows on disk now, including those found at the start. */
  landed: number;
  /** Rows that were already on disk when the run started. */
  resumed: number;
  /** Episodes lost (retries exhausted, rejected requests, failing gold queries); a re-run tops them up. */
  lost: number;
  lost_by: Record<string, number>;
  /** Episodes the server refused for the run's setup (context, key, model name): recorded as setup-error rows, not scored. */
  refused: number;
  refused_by: Record<string, number>;
  /** Requests retried (429, 5xx, connection, timeout); not failures of the model. */
  rerolled: number;
  rerolled_by: Record<string, number>;
  elapsed_s: number;
  /** Rows per second landed by this run. */
  rate_per_s: number;
  /** Seconds left at the current rate (null until a row has landed). */
  eta_s: number | null;
  done: boolean;
}

export interface ProgressOptions {
  total: number;
  resumed: number;
  /** Where the live line goes (default none). */
  stream?: NodeJS.WritableStream & { isTTY?: boolean };
  onProgress?: (p: ProgressSnapshot) => void;
  /** Least time between two updates in ms (default 250 on a terminal, 10000 otherwise). */
  intervalMs?: number;
  now?: () => number;
}

function fmtDuration(s: number | null): string {
  if (s === null || !Number.isFinite(s)) return "?";
  if (s < 60) return `${Math.round(s)}s`;
  if (s < 3600) return `${Math.floor(s / 60)}m${String(Math.round(s % 60)).padStart(2, "0")}s`;
  return `${Math.floor(s / 3600)}h${String(Math.floor((s % 3600) / 60)).padStart(2, "0")}m`;
}

function fmtCounts(c: Record<string, number>): string {
  return Object.entries(c).sort((a, b) => b[1] - a[1]).map(([k, v]) => `${k} ${v}`).join(", ");
}

/** One line describing a snapshot, e.g. "rows 40/100 (12 resumed) 3.1/s ETA 19s | re-rolled 2 (http_500 2)". */
export function progressLine(p: ProgressSnapshot): string {
  let line = `rows ${p.landed}/${p.total}`;
  if (p.resumed) line += ` (${p.resumed} resumed)`;
  line += ` ${p.rate_per_s.toFixed(p.rate_per_s < 10 ? 2 : 1)}/s ETA ${p.done ? "0s" : fmtDuration(p.eta_s)}`;
  if (p.rerolled) line += ` | re-rolled ${p.rerolled} (${fmtCounts(p.rerolled_by)})`;
  if (p.lost) line += ` | lost ${p.lost} (${fmtCounts(p.lost_by)})`;
  if (p.refused) line += ` | refused ${p.refused} (${fmtCounts(p.refused_by)})`;
  return line;
}

export class Progress {
  private landedNow = 0;
  private readonly lostBy: Record<string, number> = {};
  private readonly refusedBy: Record<string, number> = {};
  private readonly rerolledBy: Record<string, number> = {};
  private readonly started: number;
  private lastEmit = -Infinity;
  private finished = false;
  private readonly now: () => number;
  private readonly interval: number;

  constructor(private readonly opts: ProgressOptions) {
    this.now = opts.now ?? Date.now;
    this.started = this.now();
    this.interval = opts.intervalMs ?? (opts.stream?.isTTY ? 250 : 10_000);
  }

  /** A row landed. */
  landed(): void {
    this.landedNow++;
    this.maybeEmit();
  }

  /** A request was retried for `reason`. */
  rerolled(reason: string): void {
    this.rerolledBy[reason] = (this.rerolledBy[reason] ?? 0) + 1;
    this.maybeEmit();
  }

  /** An episode was lost for `reason`. */
  lost(reason: string): void {
    this.lostBy[reason] = (this.lostBy[reason] ?? 0) + 1;
    this.maybeEmit();
  }

  /** An episode was refused for the run's setup (`reason`); its setup-error row is written. */
  refused(reason: string): void {
    this.refusedBy[reason] = (this.refusedBy[reason] ?? 0) + 1;
    this.maybeEmit();
  }

  /** The counts now. */
  snapshot(): ProgressSnapshot {
    const elapsed = (this.now() - this.started) / 1000;
    const rate = elapsed > 0 ? this.landedNow / elapsed : 0;
    const lost = Object.values(this.lostBy).reduce((a, b) => a + b, 0);
    const refused = Object.values(this.refusedBy).reduce((a, b) => a + b, 0);
    const remaining = this.opts.total - this.opts.resumed - this.landedNow - lost - refused;
    return {
      total: this.opts.total,
      landed: this.opts.resumed + this.landedNow,
      resumed: this.opts.resumed,
      lost,
      lost_by: { ...this.lostBy },
      refused,
      refused_by: { ...this.refusedBy },
      rerolled: Object.values(this.rerolledBy).reduce((a, b) => a + b, 0),
      rerolled_by: { ...this.rerolledBy },
      elapsed_s: elapsed,
      rate_per_s: rate,
      eta_s: rate > 0 ? Math.max(0, remaining) / rate : null,
      done: this.finished,
    };
  }

  /** Emits the final state (always, whatever the throttle) and ends the live line. */
  finish(): ProgressSnapshot {
    this.finished = true;
    const snap = this.emit();
    const s = this.opts.stream;
    if (s?.isTTY) s.write("\n");
    return snap;
  }

  private maybeEmit(): void {
    if (this.now() - this.lastEmit >= this.interval) this.emit();
  }

  private emit(): ProgressSnapshot {
    this.lastEmit = this.now();
    const snap = this.snapshot();
    const s = this.opts.stream;
    if (s) s.write(s.isTTY ? `\r\x1b[2K${progressLine(snap)}` : `${progressLine(snap)}\n`);
    this.opts.onProgress?.(snap);
    return snap;
  }
}
