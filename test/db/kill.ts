/** Killing a real SQL worker of an ExecutorPool while it runs a query, for the tests of what a death means. */
import { readFileSync } from "node:fs";
import type { ExecutorPool } from "../../lib/db/pool.js";

/** A query that runs long (n steps of a recursive CTE, about a second per few million on one core) and answers `n`. */
export function slowCount(n: number): string {
  return `WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < ${n}) SELECT count(*) AS n FROM c`;
}

/** CPU ticks (user + system) a process has used, from /proc. */
function cpuTicks(pid: number): number {
  const fields = readFileSync(`/proc/${pid}/stat`, "utf8").split(") ")[1].split(" ");
  return Number(fields[11]) + Number(fields[12]);
}

const tick = () => new Promise((r) => setTimeout(r, 10));

/**
 * Waits until a worker of `pool` runs a query and has spent CPU on it (it is inside SQLite, not waiting for
 * the message), then SIGKILLs that worker; returns its pid, or undefined when `until` settled first (the
 * work being watched ended without another query to kill). Ordering only: no fixed delay decides anything.
 */
export async function killWhileRunning(pool: ExecutorPool, until?: Promise<unknown>, minTicks = 3): Promise<number | undefined> {
  let settled = false;
  void until?.then(
    () => (settled = true),
    () => (settled = true),
  );
  for (; !settled; ) {
    const [pid] = pool.busyWorkerPids();
    if (pid !== undefined) {
      let start: number;
      try {
        start = cpuTicks(pid);
      } catch {
        await tick();
        continue;
      }
      for (;;) {
        let now: number;
        try {
          now = cpuTicks(pid);
        } catch {
          break; // it exited on its own; look again
        }
        if (settled || !pool.busyWorkerPids().includes(pid)) break;
        if (now - start >= minTicks) {
          process.kill(pid, "SIGKILL");
          return pid;
        }
        await tick();
      }
    }
    await tick();
  }
  return undefined;
}
