/** Helpers shared by the tests: run the real `t2s` binary, make scratch folders. */
import { spawn } from "node:child_process";
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";

export const repoRoot = resolve(process.cwd());
export const t2sBin = join(repoRoot, "bin", "t2s.js");

export interface CliResult {
  code: number;
  stdout: string;
  stderr: string;
}

/** Runs `t2s ...args` in a child process, optionally feeding stdin, and collects its output. */
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
export function scratchDir(prefix = "t2s-test-"): string {
  return mkdtempSync(join(tmpdir(), prefix));
}
