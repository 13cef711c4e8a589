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
