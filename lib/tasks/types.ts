/** The task record: one question over one database with its gold query. Stored one per jsonl line. */
export type Difficulty = "easy" | "medium" | "hard" | (string & {});

/** How result sets of this task are compared (overrides the verifier defaults). */
export interface GradingOverrides {
  /** "top-level": row order matters only when the gold has a top-level ORDER BY; "anywhere": Spider's rule;
   * "ignore": never; "always": always. */
  order?: "top-level" | "anywhere" | "ignore" | "always";
  /** BIRD-Platinum `subset`: every row the candidate returns must be among the gold rows (see docs/verifier.md). */
  subset?: boolean;
  /** BIRD-Platinum `subset,=,N` / `subset,>=,N`: how many rows the candidate must return. */
  subset_rows?: { op: "=" | ">="; n: number };
  /** Decimals numbers are rounded to before comparing; null compares numbers exactly. */
  round?: number | null;
  /** "fold": text trimmed and case-folded (the kit's default); "exact": as stored (the official evaluators). */
  text?: "fold" | "exact";
}

export interface Task {
  id: string;
  db_id: string;
  /** Path of the SQLite file, relative to the task file's folder or absolute. */
  db_path: string;
  question: string;
  gold_sql: string;
  evidence?: string;
  difficulty: Difficulty;
  archetype: string;
  /** Question style (casual, formal, terse, analyst, or the source's). */
  style: string;
  split: "train" | "holdout";
  grading?: GradingOverrides;
  /** How gold and candidate SQL are read (lib/db/dialect.ts): "spider" for tasks of Spider and BIRD
   * folders (double-quoted strings, the evaluator's normalisations), absent for the kit's own SQLite. */
  dialect?: "sqlite" | "spider";
  source: string;
}
