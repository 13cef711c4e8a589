/**
 * One line of `t2s grade --jsonl`: a request line in, its answer line out (never throws: a bad line or a
 * failing gold becomes `{"error": "line N: ..."}`). Shared by the command's two paths: queries on the
 * executor pool, and the fast graders (grade-worker.ts) that run everything in their own process.
 */
import { isT2sError } from "../core/errors.js";
import type { Executor } from "../db/types.js";
import { textRules } from "./dialects.js";
import type { GoldCache } from "./goldcache.js";
import { grade, type GradableTask, type GradeOptions } from "./grade.js";
import { gradeAnswer, parseGradeRequest, type GradeRequest, type RequestDefaults } from "./request.js";
import type { GradeResult } from "./types.js";

/** The command's flags that are not per-line fields. */
export interface LineOptions {
  neighborSeed: number;
  timeoutMs: number;
  maxRows?: number;
  suiteDir?: string;
  /** Gold result cache (default the shared one), as grade() takes it. */
  goldCache?: GoldCache | false;
}

/**
 * What a request may carry besides a line's fields (the environment service's items): the task it names,
 * whose `grading` overrides and evidence apply below the line's own fields, and the unsafe tool query that
 * ended the episode (graded `unsafe`, as the episode loop does under endOnUnsafeTool).
 */
export interface RequestContext {
  task?: GradableTask;
  unsafeToolQuery?: string;
  /** Cancels the grade when aborted (the client went away). */
  signal?: AbortSignal;
}

/** Grades one parsed request: the one grading path of `t2s grade` and `t2s env serve`. */
export function gradeRequest(executor: Executor, req: GradeRequest, o: LineOptions, ctx: RequestContext = {}): Promise<GradeResult> {
  const opts: GradeOptions = {
    executor,
    preset: req.preset,
    isReply: req.reply,
    finishReason: req.finishReason,
    invalidToolCalls: req.invalidToolCalls,
    neighbors: req.neighbors,
    neighborSeed: o.neighborSeed,
    timeoutMs: o.timeoutMs,
    maxRows: o.maxRows,
    dialect: req.dialect,
    distinct: req.distinct,
    suiteDir: o.suiteDir,
    ...(o.goldCache !== undefined ? { goldCache: o.goldCache } : {}),
    ...(ctx.unsafeToolQuery !== undefined ? { unsafeToolQuery: ctx.unsafeToolQuery } : {}),
    ...(ctx.signal ? { signal: ctx.signal } : {}),
    compare: { order: req.order, round: req.round, numericText: req.numericText, ...textRules(req.text) },
  };
  const target: GradableTask = { ...ctx.task, db_path: req.db, gold_sql: req.gold, ...(req.dbId !== undefined ? { db_id: req.dbId } : {}) };
  return grade(target, req.pred, opts);
}

/** The answer line (without newline) for input line `n`. */
export async function gradeLine(executor: Executor, raw: string, n: number, defaults: RequestDefaults, o: LineOptions): Promise<string> {
  const req = parseGradeRequest(raw, defaults, { strict: true });
  if ("error" in req) return JSON.stringify({ error: `line ${n}: ${req.error}` });
  try {
    return JSON.stringify(gradeAnswer(await gradeRequest(executor, req, o)));
  } catch (e) {
    // one bad request must not end the stream: every failure becomes that line's answer
    if (isT2sError(e)) return JSON.stringify({ error: `line ${n}: ${e.code}: ${e.message}` });
    return JSON.stringify({ error: `line ${n}: ${e instanceof Error ? e.message : String(e)}` });
  }
}
