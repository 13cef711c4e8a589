/**
 * The executor pool: N worker processes, each running one read-only query at a time. better-sqlite3 has no
 * interrupt or progress handler, so the pool enforces limits from outside: a query that outlives its timeout
 * or grows its worker past the memory ceiling gets the worker killed (SIGKILL) and replaced, and its caller an
 * answer at once. Queued calls wait for the next ready worker and are never dropped. Idle workers do not keep
 * the parent's event loop alive, so a forgotten close() cannot hang a script. Each running worker is also sent
 * up to PIPELINE_DEPTH more queries, run after its current one, so it never sits idle while answers travel. A
 * query's clock starts only when the worker reaches it; queries queued behind one that has used half its time
 * are taken back and given to other workers (the worker's late answers to them are ignored).
 *
 * At most `workers` queries run at once, except that a query never waits for a lane longer than a quarter
 * of its timeout: then it runs on an extra worker (an idle spare at once, else a new one), up to
 * OVERFLOW_FACTOR x `workers` processes. Runaway queries filling every lane therefore delay a normal one by
 * less than one query timeout, not by a timeout per runaway queued ahead of it.
 *
 * A worker that dies while it runs a query (killed from outside, crashed) or that reports a failure of its
 * own rather than of the query has said nothing about the query: the query runs again on a fresh worker, up
 * to INFRA_RETRIES times, and after that the call rejects with T2sError("infra_error"). Such a death is never
 * answered as the query's error, so a grade or a cache never mistakes it for one. Deaths the query caused
 * itself are answered as before: its time limit (`timeout`) and its memory (`too_large`).
 */
import { cpus } from "node:os";
import { resolve } from "node:path";
import { performance } from "node:perf_hooks";
import { QUERY_TIMEOUT_MS, RESULT_ROWS } from "../core/defaults.js";
import { T2sError } from "../core/errors.js";
import { checkSqlText } from "./allowlist.js";
import { isExact } from "./exact.js";
import type { RunReply, RunRequest, WorkerMessage } from "./protocol.js";
import { DEFAULT_MAX_RESULT_BYTES } from "./run.js";
import { refChild, residentMb, spawnWorker, stopChild } from "./spawn.js";
import type { ExecError, ExecOptions, ExecOutcome, Executor, ExecutorPoolOptions, PoolStats } from "./types.js";
import { clearTimers, isIdle, type Job, type Slot } from "./slot.js";

export type { ExecutorPoolOptions, PoolStats } from "./types.js";

const MEMORY_POLL_MS = 50;
/** Queries sent to a running worker beyond the one it runs. */
const PIPELINE_DEPTH = 2;
const MAX_TIMER_MS = 2_147_483_647;
const KILL_MEMORY_MS = 5000;
const START_FAILURE_LIMIT = 3;
/** Processes the pool may grow to, as a multiple of `workers`, for queries that waited too long for a lane. */
const OVERFLOW_FACTOR = 4;
/** The share of its timeout a query waits for a lane before it gets an extra worker. */
const LANE_WAIT_SHARE = 0.25;
/** Times a query is run again on a fresh worker after its worker died under it (or failed inside) before the call rejects with `infra_error`. */
export const INFRA_RETRIES = 2;

const fail = (kind: ExecError["kind"], message: string): ExecOutcome => ({ ok: false, error: { kind, message } });
const cancelledError = () => new T2sError("cancelled", "the query was cancelled: whoever asked for it went away");

/** A pool of read-only SQLite worker processes with hard timeouts and a memory ceiling. */
export class ExecutorPool implements Executor {
  readonly size: number;
  readonly memoryLimitMb: number;
  readonly maxResultBytes: number;
  readonly spareWorkers: number;
  private readonly slots: Slot[] = [];
  private readonly queue: Job[] = [];
  private nextId = 1;
  private closed = false;
  private startFailures = 0;
  /** When workers were last killed; a burst of kills keeps extra workers starting, since starts are slow. */
  private killTimes: number[] = [];
  /** Wakes pump() when the head of the queue has waited its share of the timeout for a lane. */
  private overdueTimer?: NodeJS.Timeout;
  private readonly counters = { completed: 0, timeouts: 0, memoryKills: 0, crashes: 0, restarts: 0, infraRetries: 0, infraErrors: 0 };

  constructor(options: ExecutorPoolOptions = {}) {
    const workers = options.workers ?? Math.max(1, cpus().length);
    if (!Number.isInteger(workers) || workers < 1) throw new T2sError("bad_pool_options", `workers must be an integer >= 1, got ${workers}`);
    const mem = options.memoryLimitMb ?? 1024;
    if (!Number.isFinite(mem) || mem < 128) throw new T2sError("bad_pool_options", `memoryLimitMb must be >= 128, got ${mem}`);
    const maxBytes = options.maxResultBytes ?? DEFAULT_MAX_RESULT_BYTES;
    if (!Number.isFinite(maxBytes) || maxBytes < 1) throw new T2sError("bad_pool_options", `maxResultBytes must be >= 1, got ${maxBytes}`);
    const spares = options.spareWorkers ?? 1;
    if (!Number.isInteger(spares) || spares < 0) throw new T2sError("bad_pool_options", `spareWorkers must be an integer >= 0, got ${spares}`);
    this.size = workers;
    this.memoryLimitMb = mem;
    this.maxResultBytes = maxBytes;
    this.spareWorkers = spares;
    this.started = !options.startOnDemand;
    if (this.started) this.ensureWorkers();
  }

  /** Whether workers have been asked for (false only for a startOnDemand pool before its first query). */
  private started: boolean;

  /** Runs one read-only statement; resolves with rows or a typed error (never rejects for bad SQL). */
  execute(dbPath: string, sql: string, options: ExecOptions = {}): Promise<ExecOutcome> {
    if (this.closed) return Promise.reject(new T2sError("pool_closed", "the executor pool is closed; create a new ExecutorPool"));
    // setTimeout cannot wait longer than 2^31-1 ms (it would fire at once), so longer limits are capped.
    const timeoutMs = Math.min(options.timeoutMs ?? QUERY_TIMEOUT_MS, MAX_TIMER_MS);
    const maxRows = options.maxRows ?? RESULT_ROWS;
    if (!Number.isFinite(timeoutMs) || timeoutMs <= 0) {
      return Promise.reject(new T2sError("bad_exec_options", `timeoutMs must be a positive number, got ${timeoutMs}`));
    }
    if (!Number.isInteger(maxRows) || maxRows < 0) {
      return Promise.reject(new T2sError("bad_exec_options", `maxRows must be an integer >= 0, got ${maxRows}`));
    }
    const signal = options.signal;
    if (signal?.aborted) return Promise.reject(cancelledError());
    if (typeof dbPath !== "string" || dbPath.trim() === "") return Promise.resolve(fail("no_database", "no database path was given"));
    const textError = checkSqlText(sql);
    if (textError) return Promise.resolve({ ok: false, error: textError });
    if (!this.started) {
      this.started = true;
      this.ensureWorkers();
    }
    if (this.startFailures >= START_FAILURE_LIMIT) {
      // A previous burst of failed starts gave up; try again for this call.
      this.startFailures = 0;
      this.ensureWorkers();
    }
    return new Promise<ExecOutcome>((resolvePromise, reject) => {
      const id = this.nextId++;
      const path = resolve(dbPath);
      const request: RunRequest = { id, dbPath: path, sql, maxRows, maxResultBytes: this.maxResultBytes, timeoutMs, dialect: options.dialect, ...(isExact(path) ? { exactPath: true } : {}) };
      const job: Job = { id, queuedAt: performance.now(), request, timeoutMs, failedAttempts: 0, resolve: resolvePromise, reject };
      if (signal) {
        const onAbort = () => this.cancel(job);
        signal.addEventListener("abort", onAbort, { once: true });
        const off = () => signal.removeEventListener("abort", onAbort);
        job.resolve = (o) => {
          off();
          resolvePromise(o);
        };
        job.reject = (e) => {
          off();
          reject(e);
        };
      }
      this.queue.push(job);
      this.pump();
    });
  }

  /** Process ids of the current workers (for monitoring; killing one only costs a retry of its current query). */
  workerPids(): number[] {
    return this.slots.map((s) => s.child.pid).filter((p): p is number => p !== undefined);
  }

  /** Process ids of the workers running a query now. */
  busyWorkerPids(): number[] {
    return this.slots.filter((s) => s.job).map((s) => s.child.pid).filter((p): p is number => p !== undefined);
  }

  /** Resolves when `workers + spareWorkers` idle workers are started and waiting (useful before timing anything). */
  async ready(): Promise<void> {
    if (!this.started) {
      this.started = true;
      this.ensureWorkers();
    }
    while (!this.closed && this.slots.filter((s) => isIdle(s)).length < this.size + this.spareWorkers) {
      if (this.startFailures >= START_FAILURE_LIMIT) throw new T2sError("worker_start_failed", "the SQL worker processes could not start");
      await new Promise((r) => setTimeout(r, 20));
    }
  }

  /** Counters for monitoring and benchmarks. */
  stats(): PoolStats {
    return {
      workers: this.slots.length,
      busy: this.slots.filter((s) => s.job).length,
      queued: this.queue.length,
      ...this.counters,
    };
  }

  /** Stops every worker; queued and running calls are rejected with `pool_closed`. */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    if (this.overdueTimer) clearTimeout(this.overdueTimer);
    const err = new T2sError("pool_closed", "the executor pool was closed before the query ran");
    for (const job of this.queue.splice(0)) job.reject(err);
    const exits: Promise<void>[] = [];
    for (const slot of this.slots.splice(0)) {
      slot.retired = true;
      clearTimers(slot);
      if (slot.job) slot.job.reject(err);
      for (const j of slot.backlog.splice(0)) j.reject(err);
      slot.job = undefined;
      exits.push(stopChild(slot.child));
    }
    await Promise.all(exits);
  }

  private startWorker(): void {
    const child = spawnWorker(this.memoryLimitMb);
    const slot: Slot = { child, ready: false, backlog: [], abandoned: new Set(), stderrTail: "", retired: false, startedAt: 0, long: false };
    this.slots.push(slot);
    child.stderr?.on("data", (d: Buffer) => {
      slot.stderrTail = (slot.stderrTail + d.toString()).slice(-4000);
    });
    child.on("message", (m: WorkerMessage) => this.onMessage(slot, m));
    child.on("exit", (code, signal) => this.onExit(slot, code, signal));
    child.on("error", (e: Error) => {
      slot.stderrTail += `\n${e.message}`;
      // A process that never started (no pid) emits no 'exit'; one that did is killed and its 'exit' follows.
      if (child.pid === undefined) this.onExit(slot, null, null);
      else if (child.exitCode === null && child.signalCode === null) child.kill("SIGKILL");
    });
    this.updateRefs();
  }

  private onMessage(slot: Slot, m: WorkerMessage): void {
    if ("ready" in m) {
      slot.ready = true;
      this.startFailures = 0;
      this.pump();
      return;
    }
    const reply = m as RunReply;
    if (slot.abandoned.delete(reply.id)) {
      // a query taken back from this worker: another one answers it; this worker may be free again
      this.pump();
      return;
    }
    const job = slot.job;
    if (!job || job.id !== reply.id) return; // a late reply for a call already answered
    if (reply.infra !== undefined) {
      // the worker failed, not the query: a fresh worker runs it again
      this.retire(slot, (j) => this.failedUnder(j, `the SQL worker failed (${reply.infra})`));
      return;
    }
    clearTimers(slot);
    slot.job = undefined;
    this.counters.completed++;
    job.resolve(reply.outcome);
    const next = slot.backlog.shift();
    if (next) this.startClock(slot, next);
    this.pump();
    this.trimWorkers();
  }

  private onExit(slot: Slot, code: number | null, signal: NodeJS.Signals | null): void {
    if (slot.exited) return;
    slot.exited = true;
    const index = this.slots.indexOf(slot);
    if (index >= 0) this.slots.splice(index, 1);
    clearTimers(slot);
    if (slot.retired || this.closed) return;
    const job = slot.job;
    slot.job = undefined;
    this.takeBack(slot);
    if (!slot.ready) {
      this.startFailures++;
      if (this.startFailures >= START_FAILURE_LIMIT) {
        const err = new T2sError("worker_start_failed", `the SQL worker process could not start (exit ${code ?? signal}): ${slot.stderrTail.trim().slice(-800) || "no output"}`);
        for (const j of this.queue.splice(0)) j.reject(err);
        if (job) job.reject(err);
        this.updateRefs();
        return;
      }
    }
    if (job && performance.now() - slot.startedAt >= job.timeoutMs) {
      // the worker's own watchdog stopped it (this process was too busy to do it in time)
      this.counters.timeouts++;
      job.resolve(fail("timeout", `the query ran longer than ${job.timeoutMs} ms and was stopped`));
    } else if (job) {
      this.counters.crashes++;
      const memory = /out of memory|allocation failed|heap limit/i.test(slot.stderrTail) || signal === "SIGABRT" || signal === "SIGTRAP" || code === 134 || code === 133;
      if (memory) job.resolve(fail("too_large", `the query ran out of memory (ceiling ${this.memoryLimitMb} MB per worker) and was stopped`));
      else this.failedUnder(job, `the SQL worker running the query died (${signal ?? `exit code ${code}`})`);
    }
    this.counters.restarts++;
    this.ensureWorkers();
    this.pump();
  }

  /** Workers wanted now: the running ones, the spares, and one in advance for each long-running query. */
  private target(): number {
    const now = performance.now();
    this.killTimes = this.killTimes.filter((t) => now - t < KILL_MEMORY_MS);
    const burst = Math.min(this.size + 1, this.killTimes.length);
    return this.size + this.spareWorkers + burst + this.slots.filter((s) => s.job && s.long).length;
  }

  /** Puts the queries queued in a worker back at the head of the queue, in order (they have not started). */
  private takeBack(slot: Slot): void {
    const back = slot.backlog.splice(0);
    if (back.length === 0) return;
    if (!slot.retired && !slot.exited) for (const j of back) slot.abandoned.add(j.id);
    this.queue.unshift(...back.filter((j) => !j.cancelled));
  }

  private ensureWorkers(): void {
    if (this.closed || this.startFailures >= START_FAILURE_LIMIT) return;
    while (this.slots.length < this.target()) this.startWorker();
  }

  /** Stops idle workers beyond the target (left over when a long query finished instead of being killed). */
  private trimWorkers(): void {
    while (this.queue.length === 0 && this.slots.length > this.target()) {
      const idle = this.slots.find((s) => isIdle(s));
      if (!idle) return;
      idle.retired = true;
      this.slots.splice(this.slots.indexOf(idle), 1);
      void stopChild(idle.child);
    }
  }

  /**
   * Cancels a call whose signal aborted: a queued one leaves the queue, a running one has its worker killed
   * (and replaced), one sent to a worker behind its current query is answered now and its worker stopped when
   * it reaches it (startClock). The call rejects with `cancelled`.
   */
  private cancel(job: Job): void {
    if (job.cancelled) return;
    job.cancelled = true;
    const err = cancelledError();
    const queued = this.queue.indexOf(job);
    if (queued >= 0) {
      this.queue.splice(queued, 1);
      job.reject(err);
      this.pump();
      return;
    }
    const running = this.slots.find((s) => s.job === job);
    if (running) {
      this.retire(running, (j) => j.reject(err));
      return;
    }
    job.reject(err);
  }

  /**
   * A job whose worker died or failed under it: back to the head of the queue for a fresh worker, or, past
   * INFRA_RETRIES, rejected with `infra_error` (never answered as the query's own error).
   */
  private failedUnder(job: Job, why: string): void {
    if (job.cancelled) return;
    job.failedAttempts++;
    if (job.failedAttempts <= INFRA_RETRIES) {
      this.counters.infraRetries++;
      this.queue.unshift(job);
      return;
    }
    this.counters.infraErrors++;
    job.reject(new T2sError("infra_error", `${why}; the query was run ${job.failedAttempts} times and its worker failed each time. This is a failure of the SQL sandbox, not of the query: nothing was graded (look for processes killing the workers, or memory pressure on the host)`));
  }

  /** Kills a worker whose query must stop, answers its caller (`answer`: an outcome, or what to do with the job), and starts a replacement. */
  private retire(slot: Slot, answer: ExecOutcome | ((job: Job) => void)): void {
    const job = slot.job;
    slot.retired = true;
    slot.job = undefined;
    clearTimers(slot);
    this.takeBack(slot);
    slot.child.kill("SIGKILL");
    const index = this.slots.indexOf(slot);
    if (index >= 0) this.slots.splice(index, 1);
    if (job) {
      if (typeof answer === "function") answer(job);
      else job.resolve(answer);
    }
    this.counters.restarts++;
    this.killTimes.push(performance.now());
    this.ensureWorkers();
    this.pump();
  }

  private watchMemory(slot: Slot): void {
    slot.memTimer = setTimeout(() => {
      const job = slot.job;
      if (!job || slot.retired) return;
      if (!slot.long && performance.now() - slot.startedAt >= job.timeoutMs / 2) {
        slot.long = true;
        // the queries behind it go to other workers rather than wait for it to end or be stopped
        this.takeBack(slot);
        this.ensureWorkers();
        this.pump();
      }
      const mb = slot.child.pid !== undefined ? residentMb(slot.child.pid) : undefined;
      if (mb !== undefined && mb > this.memoryLimitMb) {
        this.counters.memoryKills++;
        this.retire(slot, fail("too_large", `the query used more than ${this.memoryLimitMb} MB of memory and was stopped`));
        return;
      }
      this.watchMemory(slot);
    }, MEMORY_POLL_MS);
  }

  /** The worker has reached `job`: its time limit and the memory watch start now (a cancelled one stops the worker). */
  private startClock(slot: Slot, job: Job): void {
    slot.job = job;
    if (job.cancelled) {
      this.retire(slot, () => undefined);
      return;
    }
    slot.startedAt = performance.now();
    slot.long = false;
    slot.timer = setTimeout(() => {
      if (slot.job !== job) return;
      this.counters.timeouts++;
      this.retire(slot, fail("timeout", `the query ran longer than ${job.timeoutMs} ms and was stopped`));
    }, job.timeoutMs);
    this.watchMemory(slot);
  }

  private send(slot: Slot, job: Job): void {
    try {
      slot.child.send(job.request);
    } catch {
      // the worker is gone; its exit handler answers the job
    }
  }

  /** How long `job` may still wait for a lane before it gets an extra worker (<= 0: overdue). */
  private laneWaitLeft(job: Job): number {
    return job.queuedAt + job.timeoutMs * LANE_WAIT_SHARE - performance.now();
  }

  /**
   * For an overdue head of the queue: starts an extra worker when none is idle (within the overflow cap),
   * else arms a timer for when the head becomes overdue. Returns whether the head may take a lane now.
   */
  private overflowFor(head: Job): boolean {
    if (this.overdueTimer) clearTimeout(this.overdueTimer);
    this.overdueTimer = undefined;
    const left = this.laneWaitLeft(head);
    if (left > 0) {
      this.overdueTimer = setTimeout(() => this.pump(), Math.ceil(left));
      this.overdueTimer.unref();
      return false;
    }
    // one idle or starting worker per overdue query, so the last of them waits for no start but its own
    const overdue = this.queue.filter((j) => this.laneWaitLeft(j) <= 0).length;
    let supply = this.slots.filter((s) => isIdle(s) || (!s.ready && !s.retired)).length;
    for (; supply < overdue && this.slots.length < this.size * OVERFLOW_FACTOR + this.spareWorkers; supply++) this.startWorker();
    return true;
  }

  private pump(): void {
    while (this.queue.length > 0 && !this.closed) {
      const running = this.slots.filter((s) => s.job || s.abandoned.size > 0).length;
      const free = running < this.size;
      const overdue = !free && this.overflowFor(this.queue[0]);
      const idle = free || overdue ? this.slots.find((s) => isIdle(s)) : undefined;
      if (idle) {
        const job = this.queue.shift() as Job;
        this.startClock(idle, job);
        this.send(idle, job);
        continue;
      }
      // an overdue query waits for its extra worker, never behind a running one
      if (overdue) break;
      // no free worker: queue behind the running worker with the shortest backlog
      let best: Slot | undefined;
      for (const s of this.slots) {
        if (!s.job || s.long || s.retired || s.abandoned.size > 0 || s.backlog.length >= PIPELINE_DEPTH) continue;
        if (!best || s.backlog.length < best.backlog.length) best = s;
      }
      if (!best) break;
      const job = this.queue.shift() as Job;
      best.backlog.push(job);
      this.send(best, job);
    }
    this.updateRefs();
  }

  /** Workers keep the event loop alive only while some call is waiting for an answer. */
  private updateRefs(): void {
    const pending = this.queue.length > 0 || this.slots.some((s) => s.job);
    for (const s of this.slots) refChild(s.child, pending);
  }
}

/** Creates a pool, runs `fn` with it and closes it; returns what `fn` returns. */
export async function withExecutor<T>(fn: (ex: Executor) => Promise<T>, opts?: ExecutorPoolOptions): Promise<T> {
  const pool = new ExecutorPool(opts);
  try {
    return await fn(pool);
  } finally {
    await pool.close();
  }
}
