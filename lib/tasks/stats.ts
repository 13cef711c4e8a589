/** Summaries of a task set: counts by split, cell, style and source, and its duplicate pairs. */
import { findDuplicates, MAX_QUESTION_OVERLAP } from "./dedup.js";
import type { Task } from "./types.js";

export interface TaskStats {
  count: number;
  train: number;
  holdout: number;
  holdout_share: number;
  /** archetype -> difficulty -> count */
  cells: Record<string, Record<string, number>>;
  by_style: Record<string, number>;
  by_db: Record<string, number>;
  /** Pairs with the same normalised gold SQL. */
  duplicate_sql_pairs: number;
  /** Pairs of questions whose word overlap (Jaccard) is above 0.75. */
  similar_question_pairs: number;
}

function bump(m: Record<string, number>, k: string): void {
  m[k] = (m[k] ?? 0) + 1;
}

/** The counts and duplicate checks of a task set. */
export function taskStats(tasks: Task[]): TaskStats {
  const cells: Record<string, Record<string, number>> = {};
  const by_style: Record<string, number> = {};
  const by_db: Record<string, number> = {};
  let holdout = 0;
  for (const t of tasks) {
    bump((cells[t.archetype] ??= {}), String(t.difficulty));
    bump(by_style, t.style);
    bump(by_db, t.db_id);
    if (t.split === "holdout") holdout++;
  }
  const dups = findDuplicates(tasks, MAX_QUESTION_OVERLAP);
  return {
    count: tasks.length,
    train: tasks.length - holdout,
    holdout,
    holdout_share: tasks.length ? holdout / tasks.length : 0,
    cells,
    by_style,
    by_db,
    duplicate_sql_pairs: dups.filter((d) => d.kind === "sql").length,
    similar_question_pairs: dups.filter((d) => d.kind === "question").length,
  };
}
