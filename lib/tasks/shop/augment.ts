/**
 * Extra training-only shop tasks: the author's templates drafted again with another seed, so the same
 * question shapes come with other literal values (a model trained on them must copy literals from the
 * question instead of memorising them). Gold queries are verified like the author's; only drafts whose id
 * falls in the train split are kept, and none whose id or normalised gold SQL equals a task of `exclude`
 * (the shipped set), so no holdout question or holdout gold query is ever trained on. Unlike the author,
 * there is no question-overlap dedup and no per-cell balancing: variants of one template are the point.
 */
import type { Executor } from "../../db/types.js";
import { sqlDuplicateKey } from "../dedup.js";
import { SeededRandom } from "../../core/random.js";
import { splitFor, taskId } from "../split.js";
import type { Task } from "../types.js";
import { verifyGoldQueries } from "./author.js";
import { readInventory } from "./inventory.js";
import { renderQuestion, STYLES } from "./style.js";
import { ARCHETYPES, DIFFICULTIES, type Template } from "./template.js";
import { SHOP_TEMPLATES } from "./templates.js";

export interface AugmentOptions {
  executor: Executor;
  seed: number;
  /** Drafts per template; at most this many tasks are kept per template. */
  attempts: number;
  /** Tasks none of the output may share an id or a normalised gold SQL with (the shipped set). */
  exclude: Task[];
  /** Questions kept per distinct gold query (default 1): more phrasings of one query, other words or styles. */
  phrasings?: number;
  /** The db_id written into tasks (default "shop"). */
  dbId?: string;
  templates?: Template[];
  onProgress?: (phase: string, done: number, total: number) => void;
}

export interface AugmentReport {
  tasks: Task[];
  /** Drafts written (templates x attempts, less those with no values). */
  candidates: number;
  /** Drafts not kept, by reason: no_values, holdout_split, in_exclude_id, in_exclude_sql, duplicate_id, duplicate_sql, or a verification reason. */
  dropped: Record<string, number>;
}

/** Drafts, verifies and filters augmented training tasks over the database at `dbPath`; returns the kept tasks (train split only) with counts. */
export async function augmentTrainingTasks(dbPath: string, opts: AugmentOptions): Promise<AugmentReport> {
  const dbId = opts.dbId ?? "shop";
  const templates = opts.templates ?? SHOP_TEMPLATES;
  const inv = readInventory(dbPath);
  const rng = new SeededRandom(opts.seed);
  const dropped: Record<string, number> = {};
  const drop = (reason: string) => (dropped[reason] = (dropped[reason] ?? 0) + 1);
  const excludeIds = new Set(opts.exclude.map((t) => t.id));
  const excludeSql = new Set(opts.exclude.map((t) => sqlDuplicateKey(t.gold_sql)));

  // drafts in the author's order (templates in turn, styles rotating); the cheap filters run before execution
  let candidates = 0;
  const drafts: { template: Template; style: string; question: string; sql: string; id: string }[] = [];
  templates.forEach((template, ti) => {
    for (let a = 0; a < opts.attempts; a++) {
      const draft = template.make({ inv, rng });
      if (!draft) {
        drop("no_values");
        continue;
      }
      candidates++;
      const style = STYLES[(a + ti) % STYLES.length];
      const question = renderQuestion(style, draft, rng);
      drafts.push({ template, style, question, sql: draft.sql, id: taskId(question, dbId) });
    }
  });
  const seenIds = new Set<string>();
  const perSql = new Map<string, number>();
  const phrasings = opts.phrasings ?? 1;
  const survivors = drafts.filter((d) => {
    const key = sqlDuplicateKey(d.sql);
    let reason: string | null = null;
    if (splitFor(d.id) !== "train") reason = "holdout_split";
    else if (excludeIds.has(d.id)) reason = "in_exclude_id";
    else if (excludeSql.has(key)) reason = "in_exclude_sql";
    else if (seenIds.has(d.id)) reason = "duplicate_id";
    else if ((perSql.get(key) ?? 0) >= phrasings) reason = "duplicate_sql";
    if (reason) {
      drop(reason);
      return false;
    }
    seenIds.add(d.id);
    perSql.set(key, (perSql.get(key) ?? 0) + 1);
    return true;
  });

  const verdicts = await verifyGoldQueries(dbPath, opts.executor, survivors.map((d) => d.sql), opts.onProgress);
  const tasks: Task[] = [];
  for (const d of survivors) {
    const verdict = verdicts.get(sqlDuplicateKey(d.sql));
    if (verdict) {
      drop(verdict);
      continue;
    }
    tasks.push({
      id: d.id,
      db_id: dbId,
      db_path: dbPath,
      question: d.question,
      gold_sql: d.sql,
      difficulty: d.template.difficulty,
      archetype: d.template.archetype,
      style: d.style,
      split: "train",
      source: `shop-augment:${d.template.name}:seed${opts.seed}`,
    });
  }
  tasks.sort((a, b) => ARCHETYPES.indexOf(a.archetype as never) - ARCHETYPES.indexOf(b.archetype as never) || DIFFICULTIES.indexOf(a.difficulty as never) - DIFFICULTIES.indexOf(b.difficulty as never) || (a.id < b.id ? -1 : 1));
  return { tasks, candidates, dropped };
}
