/** A worker of the executor pool (lib/db/pool.ts) and the queries it holds: its state, whether it is idle, and stopping its clocks. */
import type { ChildProcess } from "node:child_process";
import type { ExecOutcome } from "./types.js";
import type { RunRequest } from "./protocol.js";

export interface Job {
  id: number;
  /** When the call was made (performance.now()): how long it has waited for a lane. */
  queuedAt: number;
  request: RunRequest;
  timeoutMs: number;
  /** Times a worker died (or failed inside) while running it; each such attempt is the infrastructure's fault, not the query's. */
  failedAttempts: number;
  /** Its caller went away (ExecOptions.signal): answered already; a worker that reaches it is stopped. */
  cancelled?: boolean;
  resolve: (o: ExecOutcome) => void;
  reject: (e: Error) => void;
}

export interface Slot {
  child: ChildProcess;
  ready: boolean;
  /** The query the worker runs now. */
  job?: Job;
  /** Queries sent to the worker that it runs after `job`, in order. */
  backlog: Job[];
  /** Ids of queries sent to the worker but taken back; it still runs and answers them, and is busy until then. */
  abandoned: Set<number>;
  timer?: NodeJS.Timeout;
  memTimer?: NodeJS.Timeout;
  stderrTail: string;
  /** When the current job was sent (performance.now()). */
  startedAt: number;
  /** The current job has used half its time: a replacement is started in advance, in case it is killed. */
  long: boolean;
  /** The exit was handled (a failed spawn can report both 'error' and 'exit'). */
  exited?: boolean;
  /** Set when the pool itself killed the worker, so its exit is not reported as a crash. */
  retired: boolean;
}

/** A started worker with nothing sent to it. */
export function isIdle(s: Slot): boolean {
  return s.ready && !s.retired && !s.job && s.abandoned.size === 0;
}

/** Stops the worker's time limit and memory watch (its current job ended or was taken away). */
export function clearTimers(slot: Slot): void {
  if (slot.timer) clearTimeout(slot.timer);
  if (slot.memTimer) clearTimeout(slot.memTimer);
  slot.timer = slot.memTimer = undefined;
  slot.long = false;
}
