/**
 * The watchdog of a process that runs SQLite queries in its main thread (the pool's workers, the fast
 * graders of `t2s grade --jsonl`): a thread that SIGKILLs the process when the running query passes its
 * deadline or when the parent process has gone.
 */
import { Worker } from "node:worker_threads";

/** How long after its deadline the worker stops itself; the pool normally kills it first. */
export const WATCHDOG_GRACE_MS = 500;

/**
 * A thread that SIGKILLs this process when the running query passes its deadline or when the pool's
 * process has gone (this process was orphaned). While SQLite runs, the main thread runs no JavaScript,
 * so only another thread can act; this covers a pool whose event loop is blocked or that died.
 */
export function startWatchdog(): Float64Array {
  const deadline = new Float64Array(new SharedArrayBuffer(8));
  const code = `
    const { workerData } = require("node:worker_threads");
    const deadline = new Float64Array(workerData.buffer);
    setInterval(() => {
      const d = deadline[0];
      if ((d > 0 && Date.now() > d) || process.ppid !== workerData.ppid) process.kill(process.pid, "SIGKILL");
    }, 50);`;
  const thread = new Worker(code, { eval: true, workerData: { buffer: deadline.buffer, ppid: process.ppid } });
  thread.unref();
  return deadline;
}
