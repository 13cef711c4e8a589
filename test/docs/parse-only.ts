/**
 * Parses `t2s` command lines without running them, for the documentation examples that need a GPU, a
 * network or a long run (test/docs/examples.test.ts). Reads a JSON list of requests on stdin and prints
 * one JSON answer per request:
 *   { "argv": [...] }     -> { "ok": true } once commander has parsed the command, its flags and their
 *                            values (unknown flags, missing required options and bad values are errors)
 *   { "command": [...] }  -> { "options": ["--flag", "-f", ...] } of that subcommand, or { "error": "..." }
 */
import { readFileSync } from "node:fs";
import { Command, CommanderError } from "commander";
import { buildProgram } from "../../lib/cli/main.js";

class ParsedOnly extends Error {}

const commandsOf = (c: Command): Command[] => [c, ...c.commands.flatMap(commandsOf)];

async function parse(argv: string[]): Promise<{ ok: boolean; error?: string }> {
  const program = await buildProgram();
  let printed = "";
  for (const c of commandsOf(program)) c.exitOverride().configureOutput({ writeOut: () => undefined, writeErr: (s) => (printed += s), outputError: (s) => (printed += s) });
  // called for every subcommand's action, after its options were parsed and checked: stop there
  program.hook("preAction", () => {
    throw new ParsedOnly();
  });
  try {
    await program.parseAsync(argv, { from: "user" });
    return { ok: true };
  } catch (e) {
    if (e instanceof ParsedOnly) return { ok: true };
    if (e instanceof CommanderError && e.exitCode === 0) return { ok: true };
    return { ok: false, error: (printed || (e as Error).message).trim() };
  }
}

async function options(path: string[]): Promise<{ options?: string[]; error?: string }> {
  let cmd: Command | undefined = await buildProgram();
  for (const name of path) {
    cmd = cmd.commands.find((c) => c.name() === name || c.aliases().includes(name));
    if (!cmd) return { error: `no command 't2s ${path.join(" ")}'` };
  }
  return { options: [...cmd.options.flatMap((o) => [o.long, o.short].filter((x): x is string => !!x)), "--help", "-h"] };
}

const requests = JSON.parse(readFileSync(0, "utf8")) as Array<{ argv?: string[]; command?: string[] }>;
const answers = [];
for (const r of requests) answers.push(r.argv ? await parse(r.argv) : await options(r.command ?? []));
process.stdout.write(JSON.stringify(answers));
