/**
 * Runs a command with a file size limit (RLIMIT_FSIZE, bash's `ulimit -f`): a write that would grow a file
 * past the limit is cut short at it and the next write fails with EFBIG (Node ignores SIGXFSZ). It is a real
 * write failing midway, on any file system, without root or a mount.
 */
import { spawn } from "node:child_process";

/** True when bash can set a file size limit here. */
export function canLimitFileSize(): Promise<boolean> {
  return new Promise((resolve) => {
    const child = spawn("bash", ["-c", "ulimit -f 64"], { stdio: "ignore" });
    child.on("error", () => resolve(false));
    child.on("close", (code) => resolve(code === 0));
  });
}

/** Runs `command args` with files limited to `kib` KiB; resolves with its exit code and output. */
export function runWithFileSizeLimit(kib: number, command: string, args: string[], opts: { cwd?: string; env?: Record<string, string> } = {}): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn("bash", ["-c", `ulimit -f ${kib} && exec "$0" "$@"`, command, ...args], { cwd: opts.cwd, env: { ...process.env, ...opts.env }, stdio: ["ignore", "pipe", "pipe"] });
    let stdout = "";
    let stderr = "";
    child.stdout.on("data", (d) => (stdout += d));
    child.stderr.on("data", (d) => (stderr += d));
    child.on("error", reject);
    child.on("close", (code) => resolve({ code: code ?? -1, stdout, stderr }));
  });
}
