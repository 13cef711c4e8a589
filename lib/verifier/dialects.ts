/**
 * The official comparison rules of each execution dialect, as options of the kit's comparison:
 *  - "sqlite" (the kit's own rules): the defaults of compare.ts.
 *  - "spider" (Spider's and test-suite-sql-eval's exec match): row order matters when the gold has an
 *    ORDER BY anywhere; rows tied on the ORDER BY keys must still come in the gold's order (the official
 *    tool compares the lists); numbers exactly (1 = 1.0, as in Python), text exactly (no trim, no case
 *    folding); columns in any order; DISTINCT kept unless the run asks for `distinct: "ignore"`, which the
 *    official tool does by default.
 * Explicit options and a task's `grading` still win over these.
 */
import type { Dialect } from "../db/dialect.js";
import type { CompareOptions } from "./types.js";

/** "keep" runs queries as written; "ignore" removes every DISTINCT from gold and candidate first. */
export type DistinctRule = "keep" | "ignore";
export const DISTINCT_RULES: readonly DistinctRule[] = ["keep", "ignore"];

/** "fold": text trimmed and case-folded (the kit's default); "exact": text compared as stored. */
export type TextRule = "fold" | "exact";
export const TEXT_RULES: readonly TextRule[] = ["fold", "exact"];

/** The trim and case-fold options a text rule stands for. */
export function textRules(rule: TextRule): Pick<CompareOptions, "trim" | "caseFold"> {
  return rule === "exact" ? { trim: false, caseFold: false } : { trim: true, caseFold: true };
}

/** The comparison options of a dialect's official evaluator (empty for the kit's own rules). */
export function dialectCompareOptions(dialect: Dialect | undefined): CompareOptions {
  if (dialect !== "spider") return {};
  return { order: "anywhere", ties: false, round: null, ...textRules("exact") };
}
