/**
 * One grading request of `t2s grade --jsonl`: parsing and validating a stdin line
 *   {"db": "path.sqlite", "gold": "SQL", "pred": "SQL or a full model reply", "reply": true|false,
 *    "preset": "shaped|binary|tool-rl", "order": "top-level|anywhere|ignore|always", "round": 2 | null,
 *    "neighbors": 0, "numeric_text": false, "finish_reason": "stop|length|tool_calls", "invalid_tool_calls": 0,
 *    "dialect": "sqlite|spider", "distinct": "keep|ignore", "text": "fold|exact", "db_id": "name for --suite-dir"}
 * and the answer line {"correct", "executes", "outcome", "reason", "reward"}. Missing fields take the
 * defaults given (from the command's flags). Under `strict` (t2s grade --jsonl) an unknown field is an
 * error naming it, since a misspelt option ("preset " or "dialct") would otherwise grade by the default.
 */
import { DIALECTS, type Dialect } from "../db/dialect.js";
import { dialectCompareOptions, DISTINCT_RULES, TEXT_RULES, type DistinctRule, type TextRule } from "./dialects.js";
import { isRewardPreset } from "./rewards.js";
import type { CompareOptions, GradeResult, RewardPreset } from "./types.js";

export interface GradeRequest {
  db: string;
  gold: string;
  pred: string;
  reply: boolean;
  preset: RewardPreset;
  order: NonNullable<CompareOptions["order"]>;
  round: number | null;
  neighbors: number;
  numericText: boolean;
  finishReason?: "stop" | "length" | "tool_calls";
  invalidToolCalls: number;
  dialect: Dialect;
  distinct: DistinctRule;
  text: TextRule;
  /** The database's name in a --suite-dir folder (default: from the db path). */
  dbId?: string;
}

export type RequestDefaults = Pick<GradeRequest, "reply" | "preset" | "order" | "round" | "neighbors" | "numericText" | "dialect" | "distinct" | "text">;

export const REQUEST_DEFAULTS: RequestDefaults = { reply: true, preset: "shaped", order: "top-level", round: 2, neighbors: 0, numericText: false, dialect: "sqlite", distinct: "keep", text: "fold" };

/**
 * The defaults of a dialect: the kit's own for "sqlite"; for "spider" the official evaluator's comparison
 * (order "anywhere", no rounding, exact text; dialects.ts), which explicit flags and fields still override.
 */
export function dialectDefaults(dialect: Dialect): Pick<RequestDefaults, "order" | "round" | "text"> {
  const o = dialectCompareOptions(dialect);
  if (dialect !== "spider") return { order: REQUEST_DEFAULTS.order, round: REQUEST_DEFAULTS.round, text: REQUEST_DEFAULTS.text };
  return { order: o.order ?? "anywhere", round: o.round ?? null, text: "exact" };
}

const ORDERS = ["top-level", "anywhere", "ignore", "always"];
/** The fields a grade line may hold. */
export const GRADE_FIELDS = ["db", "gold", "pred", "reply", "preset", "order", "round", "neighbors", "numeric_text", "finish_reason", "invalid_tool_calls", "dialect", "distinct", "text", "db_id"];
const FINISH = ["stop", "length", "tool_calls"];
/** Largest K accepted per line; each neighbor is one more gold and candidate run. */
export const MAX_NEIGHBORS = 32;

/** Parses one input line; returns the request or an error message naming the problem. */
export function parseGradeRequest(line: string, defaults: RequestDefaults = REQUEST_DEFAULTS, opts: { strict?: boolean } = {}): GradeRequest | { error: string } {
  let v: unknown;
  try {
    v = JSON.parse(line);
  } catch (e) {
    return { error: `not valid JSON (${(e as Error).message})` };
  }
  if (v === null || typeof v !== "object" || Array.isArray(v)) return { error: "expected a JSON object" };
  const o = v as Record<string, unknown>;
  if (opts.strict) {
    const unknown = Object.keys(o).filter((k) => !GRADE_FIELDS.includes(k));
    if (unknown.length) return { error: `unknown field${unknown.length > 1 ? "s" : ""} ${unknown.map((k) => JSON.stringify(k)).join(", ")} (known: ${GRADE_FIELDS.join(", ")})` };
  }
  const str = (k: string, allowEmpty: boolean): string | { error: string } => {
    const x = o[k];
    if (typeof x !== "string") return { error: `field "${k}" must be a string${x === undefined ? " (it is missing)" : ""}` };
    if (!allowEmpty && x.trim() === "") return { error: `field "${k}" must not be empty` };
    return x;
  };
  const db = str("db", false);
  if (typeof db !== "string") return db;
  const gold = str("gold", false);
  if (typeof gold !== "string") return gold;
  const pred = str("pred", true);
  if (typeof pred !== "string") return pred;
  const has = (k: string) => o[k] !== undefined;
  if (has("reply") && typeof o.reply !== "boolean") return { error: `field "reply" must be true or false` };
  if (has("preset") && !isRewardPreset(o.preset)) return { error: `field "preset" must be shaped, binary or tool-rl, got ${JSON.stringify(o.preset)}` };
  if (has("order") && !ORDERS.includes(o.order as string)) return { error: `field "order" must be one of ${ORDERS.join(", ")}, got ${JSON.stringify(o.order)}` };
  if (has("round") && o.round !== null && !(Number.isInteger(o.round) && (o.round as number) >= 0 && (o.round as number) <= 12)) {
    return { error: `field "round" must be an integer 0-12 or null, got ${JSON.stringify(o.round)}` };
  }
  if (has("neighbors") && !(Number.isInteger(o.neighbors) && (o.neighbors as number) >= 0 && (o.neighbors as number) <= MAX_NEIGHBORS)) {
    return { error: `field "neighbors" must be an integer 0-${MAX_NEIGHBORS}, got ${JSON.stringify(o.neighbors)}` };
  }
  if (has("numeric_text") && typeof o.numeric_text !== "boolean") return { error: `field "numeric_text" must be true or false` };
  if (has("finish_reason") && !FINISH.includes(o.finish_reason as string)) return { error: `field "finish_reason" must be one of ${FINISH.join(", ")}` };
  if (has("dialect") && !DIALECTS.includes(o.dialect as Dialect)) return { error: `field "dialect" must be one of ${DIALECTS.join(", ")}, got ${JSON.stringify(o.dialect)}` };
  if (has("distinct") && !DISTINCT_RULES.includes(o.distinct as DistinctRule)) return { error: `field "distinct" must be keep or ignore, got ${JSON.stringify(o.distinct)}` };
  if (has("text") && !TEXT_RULES.includes(o.text as TextRule)) return { error: `field "text" must be fold or exact, got ${JSON.stringify(o.text)}` };
  if (has("db_id") && (typeof o.db_id !== "string" || o.db_id.trim() === "")) return { error: `field "db_id" must be a non-empty string` };
  // a line's own dialect brings that dialect's comparison defaults, below the line's explicit fields
  const base = has("dialect") && o.dialect !== defaults.dialect ? { ...defaults, ...dialectDefaults(o.dialect as Dialect) } : defaults;
  if (has("invalid_tool_calls") && !(Number.isInteger(o.invalid_tool_calls) && (o.invalid_tool_calls as number) >= 0)) {
    return { error: `field "invalid_tool_calls" must be an integer >= 0` };
  }
  return {
    db,
    gold,
    pred,
    reply: has("reply") ? (o.reply as boolean) : base.reply,
    preset: has("preset") ? (o.preset as RewardPreset) : base.preset,
    order: has("order") ? (o.order as GradeRequest["order"]) : base.order,
    round: o.round === undefined ? base.round : (o.round as number | null),
    neighbors: has("neighbors") ? (o.neighbors as number) : base.neighbors,
    numericText: has("numeric_text") ? (o.numeric_text as boolean) : base.numericText,
    finishReason: o.finish_reason as GradeRequest["finishReason"],
    invalidToolCalls: (o.invalid_tool_calls as number | undefined) ?? 0,
    dialect: has("dialect") ? (o.dialect as Dialect) : base.dialect,
    distinct: has("distinct") ? (o.distinct as DistinctRule) : base.distinct,
    text: has("text") ? (o.text as TextRule) : base.text,
    dbId: o.db_id as string | undefined,
  };
}

/** The answer line for a graded request: exactly correct, executes, outcome, reason, reward. */
export function gradeAnswer(r: GradeResult): { correct: boolean; executes: boolean; outcome: string; reason: string; reward: number } {
  return { correct: r.correct, executes: r.executes, outcome: r.outcome, reason: r.reason, reward: r.reward };
}
