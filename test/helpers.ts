/** Helpers shared by the tests: run the real `t2s` binary, make scratch folders, say why a test cannot run here. */
import { spawn, spawnSync } from "node:child_process";
import { existsSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";

export const repoRoot = resolve(process.cwd());
export const t2sBin = join(repoRoot, "bin", "t2s.js");

/**
 * How long a test waits for a process, a server, a cell or a page before it calls it hung: 10 minutes.
 * These limits are hang guards, never speed checks: a machine with seven other busy processes on one core
 * must still pass. Tests of a timeout mechanism itself use their own short limits and assert on the mechanism.
 */
export const HANG_GUARD_MS = 600_000;

export interface CliResult {
  code: number;
  stdout: string;
  stderr: string;
}

/** Runs `t2s ...args` in a child process, optionally feeding stdin, and collects its output (SIGKILL after timeoutMs, if given). */
export function runCli(args: string[], opts: { input?: string; env?: Record<string, string>; cwd?: string; timeoutMs?: number } = {}): Promise<CliResult> {
  return new Promise((resolvePromise, reject) => {
    const child = spawn(process.execPath, [t2sBin, ...args], {
      cwd: opts.cwd ?? repoRoot,
      env: { ...process.env, ...opts.env },
      stdio: ["pipe", "pipe", "pipe"],
    });
    let stdout = "";
    let stderr = "";
    child.stdout.on("data", (d) => (stdout += d));
    child.stderr.on("data", (d) => (stderr += d));
    const timer = opts.timeoutMs ? setTimeout(() => child.kill("SIGKILL"), opts.timeoutMs) : undefined;
    child.on("error", reject);
    child.on("close", (code) => {
      if (timer) clearTimeout(timer);
      resolvePromise({ code: code ?? -1, stdout, stderr });
    });
    child.stdin.end(opts.input ?? "");
  });
}

/** A fresh empty folder under the system temp dir. */
/**
 * A new empty folder under the system's temp folder, removed when the test file's process exits: a suite
 * run makes over a thousand of them (3.5 GB once models and databases are copied in), which would otherwise
 * stay behind. T2S_KEEP_SCRATCH=1 keeps them, to look at what a failing test wrote.
 */
export function scratchDir(prefix = "t2s-test-"): string {
  const dir = mkdtempSync(join(tmpdir(), prefix));
  if (scratch.length === 0 && process.env.T2S_KEEP_SCRATCH !== "1") process.on("exit", removeScratch);
  scratch.push(dir);
  return dir;
}

const scratch: string[] = [];

function removeScratch(): void {
  for (const dir of scratch.splice(0)) {
    try {
      rmSync(dir, { recursive: true, force: true });
    } catch {
      // a folder something still writes into is left, as before
    }
  }
}

/** Debian's Python, which the Jupyter packages of scripts/setup-system.sh install into. */
export const SYSTEM_PYTHON = "/usr/bin/python3";
/** Debian's Chromium, which playwright-core drives for figure export and page checks. */
export const SYSTEM_CHROMIUM = "/usr/bin/chromium";

// Skip reasons start with "needs Jupyter" / "needs Chromium": scripts/run-tests.mjs groups skips by these
// words and names the command that installs what is missing.
const jupyterReasons = new Map<string, string | false>();
/** false when `python` (Debian's by default) imports nbclient, nbformat, jupyter_client and ipykernel; else the reason to skip. */
export function needsJupyter(python = SYSTEM_PYTHON): string | false {
  let reason = jupyterReasons.get(python);
  if (reason === undefined) {
    const r = spawnSync(python, ["-c", "import nbclient, nbformat, jupyter_client, ipykernel"], { encoding: "utf8", timeout: HANG_GUARD_MS });
    const why = r.error ? `${python} is missing` : (r.stderr.trim().split("\n").pop() ?? `exit ${r.status}`);
    reason = r.status === 0 ? false : `needs Jupyter (python3-nbclient, python3-nbformat, jupyter-client, python3-ipykernel): ${why}`;
    jupyterReasons.set(python, reason);
  }
  return reason;
}

/** false when Debian's Chromium is installed; else the reason to skip. */
export function needsChromium(): string | false {
  return existsSync(SYSTEM_CHROMIUM) ? false : `needs Chromium (Debian's chromium at ${SYSTEM_CHROMIUM}): not installed`;
}
