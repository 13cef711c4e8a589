/**
 * Starting one worker process of the executor pool. The worker is a TypeScript file run through tsx; on
 * Linux it starts under `/bin/sh -c 'ulimit -d ...; exec node ...'` so the kernel refuses allocations past
 * the memory ceiling even when SQLite (whose own heap limits are inert in this build) allocates them.
 */
import { fork, type ChildProcess } from "node:child_process";
import { existsSync, readFileSync } from "node:fs";
import { createRequire } from "node:module";
import { pathToFileURL } from "node:url";
import { kitPath, kitRoot } from "../paths.js";

/** Address space Node and V8 reserve as data before any query runs (measured ~120 MB, kept generous). */
const DATA_BASELINE_MB = 384;

let tsxUrl: string | undefined;

/** The file URL of tsx's loader, resolved from the kit so workers start from any working directory. */
export function tsxLoaderUrl(): string {
  if (!tsxUrl) tsxUrl = pathToFileURL(createRequire(kitPath("package.json")).resolve("tsx")).href;
  return tsxUrl;
}

/** The worker's entry file. */
export function workerPath(): string {
  return kitPath("lib", "db", "worker.ts");
}

/** Starts a worker with the given memory ceiling; stderr is piped so a crash can be explained. */
export function spawnWorker(memoryLimitMb: number): ChildProcess {
  const nodeArgs = [`--max-old-space-size=${Math.max(64, Math.floor(memoryLimitMb / 2))}`, "--import", tsxLoaderUrl()];
  const common = {
    cwd: kitRoot(),
    env: { ...process.env, T2S_ROOT: kitRoot() },
    stdio: ["ignore", "ignore", "pipe", "ipc"] as ("ignore" | "pipe" | "ipc")[],
    serialization: "json" as const,
  };
  if (process.platform === "linux" && existsSync("/bin/sh")) {
    const dataKb = (memoryLimitMb + DATA_BASELINE_MB) * 1024;
    return fork(workerPath(), [], {
      ...common,
      execPath: "/bin/sh",
      execArgv: ["-c", `ulimit -d ${dataKb} 2>/dev/null; exec "$0" "$@"`, process.execPath, ...nodeArgs],
    });
  }
  return fork(workerPath(), [], { ...common, execArgv: nodeArgs });
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
