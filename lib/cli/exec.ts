/** `t2s exec`: run read-only SQL against a database through the sandboxed executor pool. */
import type { Command } from "commander";
import { cpus } from "node:os";
import { answerJsonlStream } from "./jsonl-stream.js";
import { UsageError } from "../core/errors.js";
import { formatOutcome, jsonWithIntegers } from "../db/format.js";
import { ExecutorPool } from "../db/pool.js";
import type { ExecOutcome } from "../db/types.js";
import { intOption, printJson } from "./options.js";
import { QUERY_TIMEOUT_MS } from "../core/defaults.js";

interface ExecFlags {
  db: string;
  timeoutMs: number;
  maxRows: number;
  json?: boolean;
  jsonl?: boolean;
  workers?: number;
}

type LineResult = ExecOutcome | { ok: false; error: { kind: "bad_input"; message: string } };

async function runJsonl(pool: ExecutorPool, flags: ExecFlags): Promise<void> {
  const answer = async (raw: string, n: number): Promise<string> => {
    let parsed: unknown;
    try {
      parsed = JSON.parse(raw);
    } catch (e) {
      return JSON.stringify(badInput(`line ${n}: not valid JSON (${(e as Error).message})`));
    }
    const req = (parsed && typeof parsed === "object" && !Array.isArray(parsed) ? parsed : {}) as { sql?: unknown; id?: unknown };
    const withId = (r: object) => jsonWithIntegers(req.id !== undefined ? { id: req.id, ...r } : r);
    if (typeof req.sql !== "string") return withId(badInput(`line ${n}: expected an object with a string field "sql"`));
    return withId(await pool.execute(flags.db, req.sql, { timeoutMs: flags.timeoutMs, maxRows: flags.maxRows }));
  };
  await answerJsonlStream(answer, Math.max(4, pool.size * 4), (n) => JSON.stringify(badInput(`line ${n}: blank line (every input line gets one output line)`)));
}

function badInput(message: string): LineResult {
  return { ok: false, error: { kind: "bad_input", message } };
}

export function registerExec(program: Command): void {
  program
    .command("exec")
    .description("run one read-only SQL query (or a JSONL stream of them) in the sandbox")
    .argument("[sql]", "the SQL query (omit with --jsonl)")
    .requiredOption("--db <path>", "SQLite database file")
    .option("--timeout-ms <n>", "stop a query after this many milliseconds", intOption("--timeout-ms", 1), QUERY_TIMEOUT_MS)
    .option("--max-rows <n>", "return at most this many rows (more sets truncated)", intOption("--max-rows", 0), 200)
    .option("--json", "print the outcome as one JSON object")
    .option("--jsonl", 'read {"sql": ...} objects from stdin, one per line; write one outcome per line, in order')
    .option("--workers <n>", "worker processes for --jsonl (default: number of CPUs, at most 4)", intOption("--workers", 1))
    .action(async (sql: string | undefined, flags: ExecFlags) => {
      if (flags.jsonl && sql !== undefined) throw new UsageError("give either a SQL argument or --jsonl, not both");
      if (!flags.jsonl && (sql === undefined || sql.trim() === "")) throw new UsageError("missing the SQL to run (or use --jsonl to read queries from stdin)");
      const workers = flags.workers ?? (flags.jsonl ? Math.min(4, Math.max(1, cpus().length)) : 1);
      // One query needs no spare worker; a stream keeps one ready in case a runaway is killed.
      const pool = new ExecutorPool({ workers, spareWorkers: flags.jsonl ? 1 : 0, startOnDemand: true });
      try {
        if (flags.jsonl) {
          await runJsonl(pool, flags);
          return;
        }
        const outcome = await pool.execute(flags.db, sql as string, { timeoutMs: flags.timeoutMs, maxRows: flags.maxRows });
        if (flags.json) process.stdout.write(jsonWithIntegers(outcome) + "\n");
        else if (outcome.ok) process.stdout.write(formatOutcome(outcome));
        else process.stderr.write(formatOutcome(outcome));
        if (!outcome.ok) process.exitCode = 1;
      } finally {
        await pool.close();
      }
    });
}
