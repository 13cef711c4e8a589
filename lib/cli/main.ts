/**
 * The `t2s` command line. Each command group lives in its own file under lib/cli and is registered from
 * lib/cli/commands.ts; this file only wires parsing, output of errors and exit codes:
 * 0 ok, 1 failure, 2 usage (unknown flag, bad value, missing argument). A reader that closes stdout
 * early (`t2s benchmark ... | head -3`) ends the command quietly with 0, as Unix tools do.
 */
import { Command, CommanderError } from "commander";
import { T2sError, UsageError, isT2sError } from "../core/errors.js";
import { kitVersion } from "../core/paths.js";
import { PolicyError } from "../policy/types.js";
import { commandGroups, groupsFor, type CommandGroup } from "./commands.js";

/** Builds the `t2s` program with the given command groups registered (default: all of them). */
export async function buildProgram(groups: CommandGroup[] = commandGroups): Promise<Command> {
  const program = new Command("t2s")
    .description("t2s-lab: reinforcement learning on text-to-SQL with a program verifier")
    .version(kitVersion(), "-V, --version")
    .showSuggestionAfterError(true)
    .exitOverride()
    .configureOutput({ writeErr: (s) => process.stderr.write(s), writeOut: (s) => process.stdout.write(s), outputError: (s, write) => write(usageLine(s)) });
  for (const register of await Promise.all(groups.map((g) => g.load()))) register(program);
  return program;
}

/** Runs `t2s` with the given arguments and returns the process exit code. */
export async function main(argv: string[]): Promise<number> {
  // a failure outside the awaited command (a stream's error event, a stray rejection) still gets one line
  const fatal = (e: unknown) => process.exit(reportError(e) || 1);
  process.on("uncaughtException", fatal);
  process.on("unhandledRejection", fatal);
  process.stdout.on("error", (e: NodeJS.ErrnoException) => (e.code === "EPIPE" ? stdoutClosed() : fatal(e)));
  try {
    const program = await buildProgram(groupsFor(argv));
    await program.parseAsync(argv, { from: "user" });
    return typeof process.exitCode === "number" ? process.exitCode : 0;
  } catch (e) {
    return reportError(e);
  }
}

/**
 * The reader of stdout went away (EPIPE: `| head` had its lines): nothing more can be said, so the work
 * stops at once and the command ends with 0, the reader having taken all it wanted. Exit 0 rather than
 * the shell's 141 (128 + SIGPIPE) keeps `set -o pipefail` scripts whole. Nothing written to files is at
 * risk: rows and logs go out in whole appends, checkpoints and sidecars by rename, and a lock left by
 * the stop names a process that no longer runs, so the next run takes it over (as after a kill).
 */
function stdoutClosed(): never {
  process.exit(0);
}

/** Commander's "error: unknown option '--x'\n(Did you mean --y?)" as the kit's one error line. */
function usageLine(message: string): string {
  const text = message.replace(/^error:\s*/, "").split("\n").map((l) => l.trim()).filter(Boolean).join(" ");
  return `error [usage]: ${text} (run with --help for usage)\n`;
}

/** The stack of an error, for T2S_DEBUG=1 only: users get one line, developers may ask for more. */
function debugStack(e: unknown): string {
  return process.env.T2S_DEBUG === "1" && e instanceof Error && e.stack ? `${e.stack}\n` : "";
}

/** Prints the one line a failure gets (`error [code]: message`) and returns the exit code: 2 usage, 1 else. */
export function reportError(e: unknown): number {
  if (e instanceof CommanderError) {
    // help and version are "errors" to commander but successes to the user
    if (e.exitCode === 0 || e.code === "commander.helpDisplayed" || e.code === "commander.version") return 0;
    return 2; // commander already printed the message
  }
  // a usage error raised below the CLI (a bad --backend, a bad env value) is still a usage error: exit 2
  if (e instanceof UsageError || isT2sError(e, "usage")) {
    process.stderr.write(`error [usage]: ${e.message} (run with --help for usage)\n${debugStack(e)}`);
    return 2;
  }
  if (e instanceof T2sError) {
    process.stderr.write(`error [${e.code}]: ${e.message}\n${debugStack(e)}`);
    return 1;
  }
  // a policy's refusal that escaped a command (a trainer's sampler): its reason is the code, as benchmark reports it
  if (e instanceof PolicyError) {
    process.stderr.write(`error [policy_${e.reason}]: ${oneLine(e.message)}\n${debugStack(e)}`);
    return 1;
  }
  // the wasm backend's heap (4 GiB at most) ran out: its allocator hands back nothing and the next write
  // traps, so the trap, not an allocation error, is what arrives here
  if (e instanceof Error && e.name === "RuntimeError" && /memory access out of bounds/.test(e.message)) {
    process.stderr.write(`error [wasm_memory]: the wasm backend ran out of memory (its heap holds 4 GiB at most); run fewer rows at once (micro_batch_rows, batch_size, --max-batch, --concurrency) or use --backend webgpu\n${debugStack(e)}`);
    return 1;
  }
  // not a kit error: a bug or an unexpected system failure; still one line, the stack on request
  const sys = e as NodeJS.ErrnoException;
  if (sys?.code === "EISDIR") {
    const where = (sys as { dest?: string }).dest ?? sys.path;
    process.stderr.write(`error [is_a_folder]: ${where ? `${where} is a folder` : "a folder was given"} where a file was expected; give a file's path${debugStack(e) ? `\n${debugStack(e)}` : "\n"}`);
    return 1;
  }
  const code = typeof sys?.code === "string" && /^E[A-Z]+$/.test(sys.code) ? sys.code.toLowerCase() : "internal";
  const message = e instanceof Error ? e.message : String(e);
  process.stderr.write(`error [${code}]: ${oneLine(message)}${debugStack(e) ? `\n${debugStack(e)}` : " (T2S_DEBUG=1 shows the stack trace)\n"}`);
  return 1;
}

function oneLine(message: string): string {
  return message.split("\n").map((l) => l.trim()).filter(Boolean).join(" ");
}
