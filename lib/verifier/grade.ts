/**
 * grade(): one reply (or one raw query) against a task's gold, with the outcome, a reason, `correct`,
 * `executes` and the training reward. Steps:
 *  1. the gold runs first (once per database hash and gold text: see goldcache.ts); a gold that fails
 *     or exceeds the row cap is a task error, thrown as T2sError("gold_failed"), never scored;
 *  2. a reply cut by the token budget (finishReason "length") is `truncated`, whatever it holds;
 *  3. the query is extracted (extract.ts) or, for raw SQL, normalised; none -> `no_sql`;
 *  4. it runs with the same limits as the gold: errors -> `sql_error`, `timeout`, `unsafe`, `too_large`;
 *  5. the results are compared (compare.ts) -> `correct` or `wrong_rows` (or `too_large` over the cap);
 *  6. with `neighbors` K > 0, a match must also hold on K perturbed copies (neighbors.ts); with
 *     `suiteDir`, on every test-suite database of the task's db_id in that folder (suite.ts).
 * A failure of the sandbox rather than of either query (the executor rejects: a worker died under the query
 * on every retry, lib/db/pool.ts) rejects the grade with that error, T2sError("infra_error"): it is neither
 * the model's `sql_error` nor the task's `gold_failed`, and nothing of it is cached.
 * Both queries run in the task's dialect (lib/db/dialect.ts; `opts.dialect` wins over `task.dialect`); with
 * `distinct: "ignore"` both run with every DISTINCT removed, as Spider's evaluator does by default.
 * Comparison options: defaults, then the dialect's official rules (dialects.ts), then the task's `grading`
 * overrides, then `opts.compare` (explicit wins).
 * The candidate's result is looked up in the gold cache as well: the same query text on the same database
 * content gives the same rows, so a query seen before (the gold itself, or another sample's answer) is not
 * run again; queries calling random() or the clock are always run.
 */
import { T2sError } from "../core/errors.js";
import { defaultMaxRows, type Dialect } from "../db/dialect.js";
import type { ExecOutcome, ExecSuccess, Executor } from "../db/types.js";
import type { Task } from "../tasks/types.js";
import { compareResults } from "./compare.js";
import { skippedEvidenceRules } from "./evidence.js";
import { extractSql, normalizeSql } from "./extract.js";
import { dialectCompareOptions, textRules, type DistinctRule } from "./dialects.js";
import { candidateOutcome, databaseKey, goldOutcome, sharedGoldCache, type GoldCache, type QueryOptions } from "./goldcache.js";
import { defaultNeighborDir, neighborDatabases } from "./neighbors.js";
import { computeReward } from "./rewards.js";
import { removeDistinct } from "./clauses.js";
import { dbIdOf, suiteDatabases } from "./suite.js";
import type { CompareOptions, GradeResult, Outcome, RewardPreset } from "./types.js";
import { QUERY_TIMEOUT_MS } from "../core/defaults.js";

/** What grade() needs of a task. */
export type GradableTask = Pick<Task, "db_path" | "gold_sql"> & Partial<Pick<Task, "grading" | "evidence" | "id" | "db_id" | "dialect">>;

export interface GradeOptions {
  executor: Executor;
  /** Reward preset (default "shaped"). */
  preset?: RewardPreset;
  /** `reply` is a model reply to extract the query from (default true), or raw SQL. */
  isReply?: boolean;
  /** Extraction fallback from the first SELECT/WITH (default true). */
  fallback?: boolean;
  /** How the reply ended; "length" makes the outcome `truncated`. */
  finishReason?: "stop" | "length" | "tool_calls";
  /** A tool query of the episode the sandbox refused as unsafe, which ended it: the outcome is `unsafe` whatever the reply holds. */
  unsafeToolQuery?: string;
  /** Invalid tool calls in the episode (tool-rl: -0.05 each, at most -0.2). */
  invalidToolCalls?: number;
  /** Apply the tool-rl evidence penalty (-0.1 per skipped rule) when the task has evidence (default false). */
  evidencePenalty?: boolean;
  /** Skipped evidence rules, if the caller counted them; else counted from `assistantTurns`. */
  skippedEvidenceRules?: number;
  /** The episode's assistant turns (text), for the evidence rules. */
  assistantTurns?: string[];
  /** Comparison options; they override the defaults and the task's `grading`. */
  compare?: CompareOptions;
  /** Perturbed database copies a match must also hold on (default 0). */
  neighbors?: number;
  /** Seed of the neighbor copies (default 0). */
  neighborSeed?: number;
  /** Folder of cached neighbor copies (default T2S_CACHE_DIR/neighbors or the system temp dir). */
  neighborDir?: string;
  /** Per-query time limit in ms (default 5000). */
  timeoutMs?: number;
  /** Row cap for both queries (default 200; 1,000,000 in the spider dialect); a larger candidate result is `too_large`. */
  maxRows?: number;
  /** Gold result cache (default the shared one); false runs the gold (and the candidate) every time. */
  goldCache?: GoldCache | false;
  /** How both queries are read (default: the task's dialect, else "sqlite"). */
  dialect?: Dialect;
  /** "ignore": remove every DISTINCT from both queries before running them (Spider's default); "keep" (default). */
  distinct?: DistinctRule;
  /** Folder of test-suite databases, <suiteDir>/<db_id>/*.sqlite, on all of which a match must hold. */
  suiteDir?: string;
  /** Cancels the grade when aborted (its queries leave the queue or have their workers stopped); it rejects with T2sError("cancelled"). */
  signal?: AbortSignal;
}

/** Returns the comparison options for a task: defaults < task.grading < explicit options. */
export function compareOptionsFor(task: GradableTask, explicit: CompareOptions = {}, dialect: Dialect | undefined = task.dialect): CompareOptions {
  const g = task.grading ?? {};
  const fromTask: CompareOptions = { ...dialectCompareOptions(dialect) };
  if (g.order !== undefined) fromTask.order = g.order;
  if (g.round !== undefined) fromTask.round = g.round;
  if (g.text !== undefined) Object.assign(fromTask, textRules(g.text));
  if (g.subset !== undefined) fromTask.subset = g.subset;
  if (g.subset_rows !== undefined) fromTask.subsetRows = g.subset_rows;
  const defined = Object.fromEntries(Object.entries(explicit).filter(([, v]) => v !== undefined)) as CompareOptions;
  return { ...fromTask, ...defined, goldSql: task.gold_sql };
}

/** The SQL as it runs under the distinct rule. */
function asRun(sql: string, distinct: DistinctRule | undefined): string {
  return distinct === "ignore" ? removeDistinct(sql) : sql;
}

/** Grades one reply against the task's gold; returns the outcome, reason, correct, executes and reward. */
export async function grade(task: GradableTask, reply: string, opts: GradeOptions): Promise<GradeResult> {
  const dialect = opts.dialect ?? task.dialect ?? "sqlite";
  const exec: QueryOptions = { timeoutMs: opts.timeoutMs ?? QUERY_TIMEOUT_MS, maxRows: opts.maxRows ?? defaultMaxRows(dialect), dialect, signal: opts.signal };
  const cache = opts.goldCache === undefined ? sharedGoldCache : opts.goldCache;
  const goldSql = asRun(task.gold_sql, opts.distinct);
  // the database is hashed once per grade, for the gold's and the candidate's cache keys (null: live, not cached)
  const dbKey = cache === false ? null : await databaseKey(task.db_path);
  const gold = checkGold(await goldOutcome(opts.executor, task.db_path, goldSql, exec, cache, dbKey), task, exec.maxRows);
  const sql = opts.isReply === false ? normalizeSql(reply) : extractSql(reply, { fallback: opts.fallback });
  const verdict = await judge();
  const skipped = opts.evidencePenalty
    ? (opts.skippedEvidenceRules ?? skippedEvidenceRules(task.evidence, opts.assistantTurns ?? [reply]))
    : 0;
  const reward = computeReward(opts.preset ?? "shaped", { outcome: verdict.outcome, invalidToolCalls: opts.invalidToolCalls, skippedEvidenceRules: task.evidence ? skipped : 0 });
  return { correct: verdict.outcome === "correct", executes: verdict.executes, outcome: verdict.outcome, reason: verdict.reason, reward, sql };

  async function judge(): Promise<{ outcome: Outcome; executes: boolean; reason: string }> {
    if (opts.unsafeToolQuery !== undefined) return { outcome: "unsafe", executes: false, reason: `the episode ended on an unsafe tool query: ${opts.unsafeToolQuery.slice(0, 120)}` };
    if (opts.finishReason === "length") return { outcome: "truncated", executes: false, reason: "reply cut by the token budget (finish reason: length)" };
    if (sql === null) return { outcome: "no_sql", executes: false, reason: opts.isReply === false ? "empty query" : "no sql query in reply" };
    const candSql = asRun(sql, opts.distinct);
    const cand = await candidateOutcome(opts.executor, task.db_path, candSql, exec, cache, dbKey);
    if (cand.ok === false) return failure(cand);
    const copts = { ...compareOptionsFor(task, opts.compare, dialect), goldSql };
    const cmp = compareResults(cand, gold, copts);
    if (cmp.tooLarge) return { outcome: "too_large", executes: true, reason: cmp.reason };
    if (!cmp.match) return { outcome: "wrong_rows", executes: true, reason: cmp.reason };
    const k = opts.neighbors ?? 0;
    if (k > 0) {
      const paths = neighborDatabases(task.db_path, k, opts.neighborSeed ?? 0, opts.neighborDir ?? defaultNeighborDir(), dbKey?.sha);
      const miss = await otherDatabasesMiss(paths, "neighbor database", goldSql, candSql, copts, exec, opts.executor, cache);
      if (miss) return { outcome: "wrong_rows", executes: true, reason: `${cmp.reason} on the database, but ${miss}` };
      if (!opts.suiteDir) return { outcome: "correct", executes: true, reason: `${cmp.reason}; also on ${k} neighbor database${k === 1 ? "" : "s"}` };
    }
    if (opts.suiteDir) {
      const paths = suiteDatabases(opts.suiteDir, task.db_id ?? dbIdOf(task.db_path));
      const miss = await otherDatabasesMiss(paths, "test-suite database", goldSql, candSql, copts, exec, opts.executor, cache);
      if (miss) return { outcome: "wrong_rows", executes: true, reason: `${cmp.reason} on the database, but ${miss}` };
      return { outcome: "correct", executes: true, reason: `${cmp.reason}; also on ${paths.length} test-suite database${paths.length === 1 ? "" : "s"}${k > 0 ? ` and ${k} neighbor database${k === 1 ? "" : "s"}` : ""}` };
    }
    return { outcome: "correct", executes: true, reason: cmp.reason };
  }
}

function failure(out: Extract<ExecOutcome, { ok: false }>): { outcome: Outcome; executes: boolean; reason: string } {
  const e = out.error;
  switch (e.kind) {
    case "timeout":
      return { outcome: "timeout", executes: false, reason: `timeout: ${e.message}` };
    case "unsafe":
      return { outcome: "unsafe", executes: false, reason: `unsafe query: ${e.message}` };
    case "too_large":
      return { outcome: "too_large", executes: true, reason: `result too large: ${e.message}` };
    case "no_database":
      throw new T2sError("no_database", e.message);
    default:
      return { outcome: "sql_error", executes: false, reason: `sql error: ${firstLine(e.message)}` };
  }
}

function firstLine(s: string): string {
  const line = s.split("\n")[0];
  return line.length > 200 ? line.slice(0, 197) + "..." : line;
}

/** Returns the gold's rows, or throws the task error that a failing gold is. */
function checkGold(out: ExecOutcome, task: GradableTask, maxRows: number): ExecSuccess {
  const where = task.id ? `task ${task.id}` : `gold query on ${task.db_path}`;
  if (out.ok === false) {
    if (out.error.kind === "no_database") throw new T2sError("no_database", `${where}: ${out.error.message}`);
    throw new T2sError("gold_failed", `${where}: the gold query failed (${out.error.kind}: ${firstLine(out.error.message)}); fix or drop the task`);
  }
  if (out.truncated) throw new T2sError("gold_failed", `${where}: the gold query returns more than ${maxRows} rows; raise the row cap (--max-rows, maxRows) or drop the task`);
  return out;
}

/** Runs gold and candidate on each other database; returns why the first disagreement fails, or null. */
async function otherDatabasesMiss(paths: string[], kind: string, goldSql: string, sql: string, copts: CompareOptions, exec: QueryOptions, executor: Executor, cache: GoldCache | false): Promise<string | null> {
  for (let i = 0; i < paths.length; i++) {
    const gold = await goldOutcome(executor, paths[i], goldSql, exec, cache);
    // a gold that cannot be graded on a copy says nothing about the candidate
    if (gold.ok === false || gold.truncated) continue;
    const cand = await candidateOutcome(executor, paths[i], sql, exec, cache);
    const label = `${kind} ${i + 1} of ${paths.length}`;
    if (cand.ok === false) return `on ${label} it fails (${cand.error.kind}: ${firstLine(cand.error.message)})`;
    const cmp = compareResults(cand, gold, copts);
    if (!cmp.match) return `on ${label} the ${cmp.reason}`;
  }
  return null;
}
