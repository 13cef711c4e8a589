/**
 * The `t2s` command line. Each command group lives in its own file under lib/cli and is registered from
 * lib/cli/commands.ts; this file only wires parsing, output of errors and exit codes:
 * 0 ok, 1 failure, 2 usage (unknown flag, bad value, missing argument).
 */
import { Command, CommanderError } from "commander";
import { T2sError, UsageError } from "../errors.js";
import { kitVersion } from "../paths.js";
import { commandGroups, groupsFor, type CommandGroup } from "./commands.js";

/** Builds the `t2s` program with the given command groups registered (default: all of them). */
export async function buildProgram(groups: CommandGroup[] = commandGroups): Promise<Command> {
  const program = new Command("t2s")
    .description("t2s-lab: reinforcement learning on text-to-SQL with a program verifier")
    .version(kitVersion(), "-V, --version")
    .showSuggestionAfterError(true)
    .showHelpAfterError("(run with --help for usage)")
    .exitOverride()
    .configureOutput({ writeErr: (s) => process.stderr.write(s), writeOut: (s) => process.stdout.write(s) });
  for (const register of await Promise.all(groups.map((g) => g.load()))) register(program);
  return program;
}

/** Runs `t2s` with the given arguments and returns the process exit code. */
export async function main(argv: string[]): Promise<number> {
  try {
    const program = await buildProgram(groupsFor(argv));
    await program.parseAsync(argv, { from: "user" });
    return typeof process.exitCode === "number" ? process.exitCode : 0;
  } catch (e) {
    return exitCodeFor(e);
  }
}

function exitCodeFor(e: unknown): number {
  if (e instanceof CommanderError) {
    // help and version are "errors" to commander but successes to the user
    if (e.exitCode === 0 || e.code === "commander.helpDisplayed" || e.code === "commander.version") return 0;
    return 2; // commander already printed the message
  }
  if (e instanceof UsageError) {
    process.stderr.write(`error: ${e.message}\n(run with --help for usage)\n`);
    return 2;
  }
  if (e instanceof T2sError) {
    process.stderr.write(`error [${e.code}]: ${e.message}\n`);
    return 1;
  }
  process.stderr.write(`error: ${e instanceof Error ? (e.stack ?? e.message) : String(e)}\n`);
  return 1;
}
