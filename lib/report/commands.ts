/**
 * Runs `t2s` subcommands (benchmark, train, serve) as child processes for notebooks: progress lines
 * stream to a callback, a failure becomes one error naming the command and its last output lines. Child
 * processes keep the heavy model and SQL worker code out of the notebook kernel, and a crash there
 * cannot take the kernel down.
 */
import { spawn, type ChildProcess } from "node:child_process";
import { kitPath, kitRoot } from "../core/paths.js";
import { T2sError } from "../core/errors.js";

export interface CommandResult {
  code: number;
  stdout: string;
  stderr: string;
}

export interface RunOptions {
  /** Receives each stderr line as it arrives (progress). */
  onLine?: (line: string) => void;
  env?: Record<string, string>;
}

function lineSplitter(onLine: (line: string) => void): (chunk: Buffer) => void {
  let buf = "";
  return (chunk) => {
    buf += chunk.toString("utf8");
    // progress bars redraw with \r; treat it as a line end too
    const parts = buf.split(/\r?\n|\r/);
    buf = parts.pop() ?? "";
    for (const p of parts) if (p.trim()) onLine(p);
  };
}

function spawnT2s(args: string[], env?: Record<string, string>): ChildProcess {
  return spawn(process.execPath, [kitPath("bin", "t2s.js"), ...args], { cwd: kitRoot(), env: { ...process.env, ...env }, stdio: ["ignore", "pipe", "pipe"] });
}

/** Returns the shell-like text of a t2s command, for showing what a notebook ran. */
export function commandText(args: string[]): string {
  return ["t2s", ...args].map((a) => (/^[\w@%+=:,./-]+$/.test(a) ? a : `'${a.replace(/'/g, "'\\''")}'`)).join(" ");
}

/** Runs `t2s ...args` to the end; resolves with its output, rejects with T2sError("command_failed") on a non-zero exit. */
export function runT2s(args: string[], opts: RunOptions = {}): Promise<CommandResult> {
  return new Promise((resolve, reject) => {
    const child = spawnT2s(args, opts.env);
    let stdout = "";
    let stderr = "";
    const split = opts.onLine ? lineSplitter(opts.onLine) : null;
    child.stdout!.on("data", (d: Buffer) => (stdout += d.toString("utf8")));
    child.stderr!.on("data", (d: Buffer) => {
      stderr += d.toString("utf8");
      split?.(d);
    });
    child.on("error", (e) => reject(new T2sError("command_failed", `${commandText(args)} could not start: ${e.message}`)));
    child.on("close", (code) => {
      if (code === 0) return resolve({ code, stdout, stderr });
      const tail = stderr.trim().split("\n").slice(-8).join("\n");
      reject(new T2sError("command_failed", `${commandText(args)} exited with ${code}:\n${tail}`));
    });
  });
}

export interface Background {
  child: ChildProcess;
  /** What the process printed so far. */
  output(): string;
  /** Stops the process (SIGTERM, then SIGKILL after 5 s) and waits for it. */
  stop(): Promise<void>;
}

/**
 * Starts `t2s ...args` in the background and resolves once a stdout line matches `ready` (e.g. the
 * serve command's "serving ... at URL"); rejects if it exits first or `timeoutMs` passes.
 */
export function startT2s(args: string[], ready: RegExp, opts: RunOptions & { timeoutMs?: number } = {}): Promise<Background & { match: RegExpMatchArray }> {
  return new Promise((resolve, reject) => {
    const child = spawnT2s(args, opts.env);
    let out = "";
    let settled = false;
    const exited = new Promise<void>((r) => child.on("close", () => r()));
    const stop = async () => {
      if (child.exitCode === null && child.signalCode === null) {
        child.kill("SIGTERM");
        const t = setTimeout(() => child.kill("SIGKILL"), 5000);
        await exited;
        clearTimeout(t);
      }
    };
    const timer = setTimeout(() => {
      if (settled) return;
      settled = true;
      void stop();
      reject(new T2sError("command_failed", `${commandText(args)} was not ready within ${opts.timeoutMs} ms:\n${out.trim().split("\n").slice(-8).join("\n")}`));
    }, opts.timeoutMs ?? 600_000);
    const split = opts.onLine ? lineSplitter(opts.onLine) : null;
    child.stderr!.on("data", (d: Buffer) => {
      out += d.toString("utf8");
      split?.(d);
    });
    child.stdout!.on("data", (d: Buffer) => {
      out += d.toString("utf8");
      const m = out.match(ready);
      if (m && !settled) {
        settled = true;
        clearTimeout(timer);
        resolve({ child, match: m, output: () => out, stop });
      }
    });
    child.on("close", (code) => {
      clearTimeout(timer);
      if (settled) return;
      settled = true;
      reject(new T2sError("command_failed", `${commandText(args)} exited with ${code} before it was ready:\n${out.trim().split("\n").slice(-8).join("\n")}`));
    });
  });
}
