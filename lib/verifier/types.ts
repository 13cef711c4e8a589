/** What grading one reply produces. `correct` is the evaluation truth; `reward` is the training signal. */
export type Outcome =
  | "correct"
  | "wrong_rows"
  | "sql_error"
  | "timeout"
  | "unsafe"
  | "too_large"
  | "no_sql"
  | "truncated";

export type RewardPreset = "shaped" | "binary" | "tool-rl";

export interface GradeResult {
  correct: boolean;
  /** The committed query ran without error. */
  executes: boolean;
  outcome: Outcome;
  /** A sentence a person can read: "result differs: got 3 rows x 2 cols, want 4 rows x 2 cols". */
  reason: string;
  reward: number;
  /** The query that was graded (after extraction), or null when none was found. */
  sql: string | null;
}

/** How `compareResults` decides that two result sets are the same answer. Every field is optional. */
export interface CompareOptions {
  /** When row order matters: "top-level" (default) when the gold has an ORDER BY outside any parentheses;
   * "anywhere" when it has ORDER BY anywhere (Spider's rule); "ignore" never; "always" always. */
  order?: "top-level" | "anywhere" | "ignore" | "always";
  /** The gold query text; needed by the "top-level" and "anywhere" rules and to find tie groups. */
  goldSql?: string;
  /** When order matters, rows that tie on the gold's ORDER BY columns may come in any order among
   * themselves (default true). Needs every ORDER BY term to be an output column; otherwise the order is
   * compared row by row. */
  ties?: boolean;
  /** "free" (default): any column order is accepted; "strict": columns must be in the gold's order. */
  columnOrder?: "free" | "strict";
  /** Decimals numbers are rounded to before comparing (default 2); null compares numbers exactly. */
  round?: number | null;
  /** Text that reads as a number ('1,234.50') compares as that number (default false). */
  numericText?: boolean;
  /** Trim text before comparing (default true). */
  trim?: boolean;
  /** Case-fold text before comparing (default true). */
  caseFold?: boolean;
  /** BIRD-Platinum `subset`: every candidate row must appear among the gold rows (a set test), instead
   * of the row multisets being equal. */
  subset?: boolean;
  /** With `subset`: how many rows the candidate must return ("=" exactly n, ">=" at least n). */
  subsetRows?: { op: "=" | ">="; n: number };
}

/** The verdict of `compareResults`. */
export interface CompareResult {
  match: boolean;
  /** Why, in words: "result matches (3 rows x 2 cols)", "result differs: got 3 rows x 2 cols, want ...". */
  reason: string;
  /** The candidate hit the row cap, so it was not compared. */
  tooLarge?: boolean;
}

/** What the reward of one episode depends on besides the outcome. */
export interface RewardFacts {
  outcome: Outcome;
  /** Tool calls the policy made that could not be run (bad arguments, unknown tool); tool-rl only. */
  invalidToolCalls?: number;
  /** Evidence rules the episode skipped (0-2); tool-rl only, and only counted when the task has
   * evidence and the evidence penalty is on. */
  skippedEvidenceRules?: number;
}
