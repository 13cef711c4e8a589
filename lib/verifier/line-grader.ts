/**
 * One line of `t2s grade --jsonl`: a request line in, its answer line out (never throws: a bad line or a
 * failing gold becomes `{"error": "line N: ..."}`). Shared by the command's two paths: queries on the
 * executor pool, and the fast graders (grade-worker.ts) that run everything in their own process.
 */
import { isT2sError } from "../core/errors.js";
import type { Executor } from "../db/types.js";
import { textRules } from "./dialects.js";
import { grade, type GradeOptions } from "./grade.js";
import { gradeAnswer, parseGradeRequest, type GradeRequest, type RequestDefaults } from "./request.js";
import type { GradeResult } from "./types.js";

/** The command's flags that are not per-line fields. */
export interface LineOptions {
  neighborSeed: number;
  timeoutMs: number;
  maxRows?: number;
  suiteDir?: string;
}

/** Grades one parsed request. */
export function gradeRequest(executor: Executor, req: GradeRequest, o: LineOptions): Promise<GradeResult> {
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
    compare: { order: req.order, round: req.round, numericText: req.numericText, ...textRules(req.text) },
  };
  return grade({ db_path: req.db, gold_sql: req.gold, db_id: req.dbId }, req.pred, opts);
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
