/** `t2s grade`: grade a query or model reply against a gold query, one at a time or as a JSONL stream. */
import type { Command } from "commander";
import { cpus } from "node:os";
import { answerJsonlStream } from "./jsonl-stream.js";
import { UsageError } from "../core/errors.js";
import { ExecutorPool } from "../db/pool.js";
import { FastGraders, fastGraderEntry } from "../verifier/fast-graders.js";
import { gradeLine, gradeRequest, type LineOptions } from "../verifier/line-grader.js";
import { isRewardPreset } from "../verifier/rewards.js";
import { dialectDefaults, gradeAnswer, MAX_NEIGHBORS, REQUEST_DEFAULTS, type GradeRequest, type RequestDefaults } from "../verifier/request.js";
import { dialectOption, intOption, printJson } from "./options.js";
import { existsSync } from "node:fs";
import { DISTINCT_RULES, TEXT_RULES, type DistinctRule, type TextRule } from "../verifier/dialects.js";
import { QUERY_TIMEOUT_MS } from "../core/defaults.js";

interface GradeFlags {
  jsonl?: boolean;
  db?: string;
  gold?: string;
  pred?: string;
  raw?: boolean;
  preset: string;
  order?: string;
  round?: string;
  text?: string;
  dialect: string;
  distinct: string;
  suiteDir?: string;
  neighbors: number;
  neighborSeed: number;
  numericText?: boolean;
  timeoutMs: number;
  maxRows?: number;
  workers?: number;
  json?: boolean;
}

/** The per-request defaults `t2s grade` (and `t2s env serve`) derive from the grading flags. */
export function defaultsFrom(flags: Pick<GradeFlags, "preset" | "order" | "round" | "text" | "dialect" | "distinct" | "suiteDir" | "neighbors" | "numericText">): RequestDefaults {
  if (!isRewardPreset(flags.preset)) throw new UsageError(`--preset must be shaped, binary or tool-rl, got '${flags.preset}'`);
  const dialect = dialectOption(flags.dialect);
  // the dialect's official comparison, then the flags given
  const base = dialectDefaults(dialect);
  const order = flags.order ?? base.order;
  if (!["top-level", "anywhere", "ignore", "always"].includes(order)) throw new UsageError(`--order must be top-level, anywhere, ignore or always, got '${order}'`);
  let round: number | null = base.round;
  if (flags.round === "none") round = null;
  else if (flags.round !== undefined) {
    round = Number(flags.round);
    if (!Number.isInteger(round) || round < 0 || round > 12) throw new UsageError(`--round must be an integer 0-12 or 'none', got '${flags.round}'`);
  }
  const text = flags.text ?? base.text;
  if (!TEXT_RULES.includes(text as TextRule)) throw new UsageError(`--text must be fold or exact, got '${text}'`);
  if (!DISTINCT_RULES.includes(flags.distinct as DistinctRule)) throw new UsageError(`--distinct must be keep or ignore, got '${flags.distinct}'`);
  if (flags.neighbors > MAX_NEIGHBORS) throw new UsageError(`--neighbors must be at most ${MAX_NEIGHBORS}, got ${flags.neighbors}`);
  if (flags.suiteDir !== undefined && !existsSync(flags.suiteDir)) throw new UsageError(`--suite-dir ${flags.suiteDir} does not exist`);
  return {
    ...REQUEST_DEFAULTS,
    preset: flags.preset,
    order: order as RequestDefaults["order"],
    round,
    neighbors: flags.neighbors,
    numericText: !!flags.numericText,
    dialect,
    distinct: flags.distinct as DistinctRule,
    text: text as TextRule,
  };
}

function lineOptions(flags: GradeFlags): LineOptions {
  return { neighborSeed: flags.neighborSeed, timeoutMs: flags.timeoutMs, maxRows: flags.maxRows, suiteDir: flags.suiteDir };
}

/**
 * Answers stdin lines in order. From the compiled dist/, lines are graded by fast grader processes
 * (lib/verifier/fast-graders.ts) and only the lines of a grader that died go to the pool; otherwise every
 * line's queries run on the pool.
 */
async function runJsonl(pool: ExecutorPool, flags: GradeFlags, defaults: RequestDefaults, workers: number): Promise<void> {
  const onPool = (raw: string, n: number) => gradeLine(pool, raw, n, defaults, lineOptions(flags));
  const entry = fastGraderEntry();
  const blank = (n: number) => JSON.stringify({ error: `line ${n}: blank line (every input line gets one output line)` });
  if (!entry) return answerJsonlStream(onPool, Math.max(8, pool.size * 8), blank);
  const graders = new FastGraders(entry, workers, defaults, lineOptions(flags), onPool);
  try {
    await answerJsonlStream((raw, n) => graders.answer(raw, n), 256 * workers, blank);
  } finally {
    await graders.close();
  }
}

/**
 * Adds the grading flags `t2s grade` and `t2s env serve` share (preset, comparison rules, neighbors,
 * limits), so both grade alike by default.
 */
export function addGradingOptions(cmd: Command): Command {
  return cmd
    .option("--preset <name>", "reward preset: shaped, binary or tool-rl", "shaped")
    .option("--dialect <name>", "sqlite (as written) or spider (as Spider/BIRD's evaluators run it: double-quoted strings, '! =', and their comparison: order anywhere, no rounding, exact text)", "sqlite")
    .option("--distinct <rule>", "keep, or ignore: remove every DISTINCT from both queries first (Spider's default)", "keep")
    .option("--order <rule>", "when row order matters: top-level (gold has a top-level ORDER BY), anywhere (Spider), ignore, always (default: top-level; anywhere with --dialect spider)")
    .option("--round <d>", "decimals numbers are rounded to before comparing, or 'none' (default: 2; none with --dialect spider)")
    .option("--text <rule>", "fold (trim and case-fold text) or exact (default: fold; exact with --dialect spider)")
    .option("--suite-dir <dir>", "test-suite databases: a match must also hold on every <dir>/<db_id>/*.sqlite (db_id from the line's db_id or the db file name)")
    .option("--numeric-text", "text that reads as a number ('1,234.50') compares as that number")
    .option("--neighbors <k>", "also require a match on K perturbed copies of the database", intOption("--neighbors", 0), 0)
    .option("--neighbor-seed <n>", "seed of the perturbed copies", intOption("--neighbor-seed", 0), 0)
    .option("--timeout-ms <n>", "stop a query after this many milliseconds", intOption("--timeout-ms", 1), QUERY_TIMEOUT_MS)
    .option("--max-rows <n>", "row cap; a larger candidate result is too_large, a larger gold a task error (default 200; 1000000 with --dialect spider)", intOption("--max-rows", 1));
}

/** Adds `t2s grade` to the program. */
export function registerGrade(program: Command): void {
  const cmd = program
    .command("grade")
    .description("grade a query or model reply against a gold query (execute both, compare result sets)")
    .option("--jsonl", 'read {"db","gold","pred",...} objects from stdin, one per line; write {"correct","executes","outcome","reason","reward"} per line, in order')
    .option("--db <path>", "SQLite database file (single grade)")
    .option("--gold <sql>", "gold SQL query (single grade)")
    .option("--pred <text>", "the model reply, or the SQL with --raw (single grade)")
    .option("--raw", "--pred is raw SQL, not a model reply to extract the query from");
  addGradingOptions(cmd)
    .option("--workers <n>", "SQL worker processes (default: number of CPUs, at most 4, for --jsonl; 1 otherwise)", intOption("--workers", 1))
    .option("--json", "print the single grade as one JSON object")
    .action(async (flags: GradeFlags) => {
      const defaults = defaultsFrom(flags);
      const single = flags.db !== undefined || flags.gold !== undefined || flags.pred !== undefined;
      if (flags.jsonl && single) throw new UsageError("give either --jsonl or --db/--gold/--pred, not both");
      if (!flags.jsonl && (flags.db === undefined || flags.gold === undefined || flags.pred === undefined)) {
        throw new UsageError("give --db, --gold and --pred (or --jsonl to read requests from stdin)");
      }
      const workers = flags.workers ?? (flags.jsonl ? Math.min(4, Math.max(1, cpus().length)) : 1);
      const pool = new ExecutorPool({ workers, startOnDemand: true });
      try {
        if (flags.jsonl) return await runJsonl(pool, flags, defaults, workers);
        const req: GradeRequest = { ...defaults, db: flags.db as string, gold: flags.gold as string, pred: flags.pred as string, reply: !flags.raw, invalidToolCalls: 0 };
        const r = await gradeRequest(pool, req, lineOptions(flags));
        if (flags.json) printJson({ ...gradeAnswer(r), sql: r.sql });
        else process.stdout.write(`${r.outcome}  reward=${r.reward}  ${r.reason}\n${r.sql !== null ? `sql: ${r.sql}\n` : ""}`);
      } finally {
        await pool.close();
      }
    });
}
