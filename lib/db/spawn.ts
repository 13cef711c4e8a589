/**
 * Starting one worker process of the executor pool. The worker is a TypeScript file run through tsx; on
 * Linux it starts under `/bin/sh -c 'ulimit -d ...; exec node ...'` so the kernel refuses allocations past
 * the memory ceiling even when SQLite (whose own heap limits are inert in this build) allocates them.
 */
import { fork, type ChildProcess } from "node:child_process";
import { existsSync, readFileSync } from "node:fs";
import { createRequire } from "node:module";
import { join } from "node:path";
import { kitPath, kitRoot } from "../core/paths.js";

/** Address space Node and V8 reserve as data before any query runs (measured ~120 MB, kept generous). */
const DATA_BASELINE_MB = 384;

let tsxHook: string | undefined;

/**
 * The path of tsx's CommonJS hook, resolved from the kit so workers start from any working directory;
 * "" where tsx is absent (the GPU-host bundle, whose worker-boot.cjs is the worker already compiled).
 */
export function tsxCjsHook(): string {
  if (tsxHook === undefined) {
    try {
      tsxHook = createRequire(kitPath("package.json")).resolve("tsx/cjs");
    } catch {
      tsxHook = "";
    }
  }
  return tsxHook;
}

/**
 * The compiled worker, when `t2s` runs from dist/ (bin/t2s.js sets T2S_DIST only when dist/ matches lib/):
 * it starts without tsx, in about a third of the time. Undefined otherwise.
 */
export function compiledWorker(): string | undefined {
  const dist = process.env.T2S_DIST;
  if (!dist) return undefined;
  const p = join(dist, "lib", "db", "worker.js");
  return existsSync(p) ? p : undefined;
}

/**
 * The file forked: the compiled worker when there is one, else a two-line CommonJS shim that loads tsx's in-thread hook and then worker.ts. The
 * package is ESM, so Node would send a .ts entry to the ESM loader, whose tsx hooks run in an extra thread
 * and take about twice as long to start; start-up time is what a caller waits after a worker is killed.
 */
export function workerEntry(): string {
  return compiledWorker() ?? kitPath("lib", "db", "worker-boot.cjs");
}

/** Starts a worker with the given memory ceiling; stderr is piped so a crash can be explained. */
export function spawnWorker(memoryLimitMb: number, entry: string = workerEntry(), env: Record<string, string> = {}): ChildProcess {
  const nodeArgs = [`--max-old-space-size=${Math.max(64, Math.floor(memoryLimitMb / 2))}`];
  const common = {
    cwd: kitRoot(),
    env: { ...process.env, T2S_ROOT: kitRoot(), T2S_TSX_CJS: tsxCjsHook(), T2S_DB_MEMORY_MB: String(memoryLimitMb), ...env },
    stdio: ["ignore", "ignore", "pipe", "ipc"] as ("ignore" | "pipe" | "ipc")[],
    serialization: "advanced" as const,
  };
  if (process.platform === "linux" && existsSync("/bin/sh")) {
    const dataKb = (memoryLimitMb + DATA_BASELINE_MB) * 1024;
    return fork(entry, [], {
      ...common,
      execPath: "/bin/sh",
      execArgv: ["-c", `ulimit -d ${dataKb} 2>/dev/null; exec "$0" "$@"`, process.execPath, ...nodeArgs],
    });
  }
  return fork(entry, [], { ...common, execArgv: nodeArgs });
}

/** Resident memory of a live process in MB, or undefined where /proc is not available. */
export function residentMb(pid: number): number | undefined {
  try {
    const pages = Number(readFileSync(`/proc/${pid}/statm`, "utf8").split(" ")[1]);
    return (pages * 4096) / (1024 * 1024);
  } catch {
    return undefined;
  }
}

/** Keeps (or stops keeping) the parent's event loop alive for a worker: the process, its IPC channel, its stderr. */
export function refChild(child: ChildProcess, on: boolean): void {
  const handles = [child, child.channel as unknown as { ref?(): void; unref?(): void } | null | undefined, child.stderr as unknown as { ref?(): void; unref?(): void } | null];
  for (const h of handles) {
    if (!h) continue;
    if (on) h.ref?.();
    else h.unref?.();
  }
}

/** Stops a worker: disconnect first (it exits when idle), SIGKILL after a second or when it cannot be asked. */
export function stopChild(child: ChildProcess): Promise<void> {
  return new Promise((done) => {
    if (child.exitCode !== null || child.signalCode !== null) return done();
    // An idle worker is unref'd; while close() waits for its exit it must keep the event loop alive,
    // or a script that closes a pool still starting ends with close() never settled.
    refChild(child, true);
    const kill = setTimeout(() => child.kill("SIGKILL"), 1000);
    child.once("exit", () => {
      clearTimeout(kill);
      done();
    });
    try {
      if (child.connected) child.disconnect();
      else child.kill("SIGKILL");
    } catch {
      child.kill("SIGKILL");
    }
  });
}
