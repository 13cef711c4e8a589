/**
 * The programmatic author of the shop task set: every template writes many drafts over the live data,
 * each framed in one of four styles; the gold queries are verified (twice, 1-50 stable rows, not all
 * NULL, not all zero), near-duplicates dropped (same normalised SQL or question overlap > 0.75), and
 * the survivors balanced over archetype x difficulty cells. Same database + same seed = same tasks.
 */
import type { Executor } from "../../db/types.js";
import { ALTERNATIVE_TOKENIZERS, DedupIndex, documentFrequency, MAX_QUESTION_OVERLAP, sqlDuplicateKey } from "../dedup.js";
import { SeededRandom } from "../../core/random.js";
import { splitFor, taskId } from "../split.js";
import type { Task } from "../types.js";
import { judgeResult, mapLimit, MAX_GOLD_ROWS } from "../verify.js";
import { readInventory } from "./inventory.js";
import { renderQuestion, STYLES } from "./style.js";
import { ARCHETYPES, DIFFICULTIES, type Template } from "./template.js";
import { SHOP_TEMPLATES } from "./templates.js";

export const DEFAULT_AUTHOR_SEED = 1;

export interface AuthorOptions {
  executor: Executor;
  seed?: number;
  /** Drafts per template (default 60). */
  attempts?: number;
  /** Most tasks kept per archetype x difficulty cell (default 70). */
  perCell?: number;
  /** Most tasks kept per template (default 30). */
  perTemplate?: number;
  /** The db_id written into tasks (default "shop"). */
  dbId?: string;
  templates?: Template[];
  onProgress?: (phase: string, done: number, total: number) => void;
}

export interface AuthorReport {
  tasks: Task[];
  candidates: number;
  /** Candidates not kept, by reason. */
  dropped: Record<string, number>;
  templates: number;
}

interface Candidate {
  template: Template;
  style: string;
  question: string;
  sql: string;
}

/** Writes and verifies the shop task set from the database at `dbPath`. */
export async function authorShopTasks(dbPath: string, opts: AuthorOptions): Promise<AuthorReport> {
  const seed = opts.seed ?? DEFAULT_AUTHOR_SEED;
  const attempts = opts.attempts ?? 60;
  const perCell = opts.perCell ?? 70;
  const perTemplate = opts.perTemplate ?? 30;
  const dbId = opts.dbId ?? "shop";
  const templates = opts.templates ?? SHOP_TEMPLATES;
  const inv = readInventory(dbPath);
  const rng = new SeededRandom(seed);
  const dropped: Record<string, number> = {};
  const drop = (reason: string) => (dropped[reason] = (dropped[reason] ?? 0) + 1);

  // 1. drafts: each template in turn, styles rotating so every template speaks in all four
  const byTemplate: Candidate[][] = templates.map((template, ti) => {
    const out: Candidate[] = [];
    for (let a = 0; a < attempts; a++) {
      const draft = template.make({ inv, rng });
      if (!draft) {
        drop("no_values");
        continue;
      }
      const style = STYLES[(a + ti) % STYLES.length];
      out.push({ template, style, question: renderQuestion(style, draft, rng), sql: draft.sql });
    }
    return out;
  });
  const all = byTemplate.flat();

  // 2. verify each distinct gold query once (executed twice)
  const verdicts = await verifyGoldQueries(dbPath, opts.executor, all.map((c) => c.sql), opts.onProgress);

  // 3. greedy keep: cells in turn, templates in turn within a cell, so no cell or template crowds out others
  const df = documentFrequency(all.map((c) => c.question));
  // the shipped rule is stricter than the documented one: overlap must stay below 0.75 (not just at most),
  // under the [a-z0-9]+ split and under the other usual word splits too
  const strict = MAX_QUESTION_OVERLAP - 1e-9;
  const index = new DedupIndex({ rank: (w) => df.get(w) ?? 0, threshold: strict });
  const others = ALTERNATIVE_TOKENIZERS.map((tokenize) => new DedupIndex({ threshold: strict, tokenize }));
  const queues = new Map<string, Candidate[][]>();
  byTemplate.forEach((cands) => {
    if (!cands.length) return;
    const cell = `${cands[0].template.archetype}/${cands[0].template.difficulty}`;
    const list = queues.get(cell) ?? [];
    list.push(rng.shuffle(cands));
    queues.set(cell, list);
  });
  const kept: Task[] = [];
  const cellCount = new Map<string, number>();
  const templateCount = new Map<string, number>();
  const cells = ARCHETYPES.flatMap((a) => DIFFICULTIES.map((d) => `${a}/${d}`)).filter((c) => queues.has(c));
  const cursor = new Map<string, number>(cells.map((c) => [c, 0]));
  let progressed = true;
  while (progressed) {
    progressed = false;
    for (const cell of cells) {
      if ((cellCount.get(cell) ?? 0) >= perCell) continue;
      const lists = (queues.get(cell) as Candidate[][]).filter((l) => l.length > 0);
      if (!lists.length) continue;
      // take the next candidate from the template whose turn it is
      const turn = (cursor.get(cell) as number) % lists.length;
      cursor.set(cell, (cursor.get(cell) as number) + 1);
      const cand = lists[turn].shift() as Candidate;
      progressed = true;
      const t = cand.template;
      if ((templateCount.get(t.name) ?? 0) >= perTemplate) {
        drop("template_full");
        continue;
      }
      const verdict = verdicts.get(sqlDuplicateKey(cand.sql));
      if (verdict) {
        drop(verdict);
        continue;
      }
      const id = taskId(cand.question, dbId);
      const hit = index.check(cand.question, cand.sql) ?? others.map((o) => o.check(cand.question)).find((h) => h !== null) ?? null;
      if (hit) {
        drop(hit.kind === "sql" ? "duplicate_sql" : "similar_question");
        continue;
      }
      index.add(id, cand.question, cand.sql);
      for (const o of others) o.add(id, cand.question);
      cellCount.set(cell, (cellCount.get(cell) ?? 0) + 1);
      templateCount.set(t.name, (templateCount.get(t.name) ?? 0) + 1);
      kept.push({
        id,
        db_id: dbId,
        db_path: dbPath,
        question: cand.question,
        gold_sql: cand.sql,
        difficulty: t.difficulty,
        archetype: t.archetype,
        style: cand.style,
        split: splitFor(id),
        source: `shop-author:${t.name}:seed${seed}`,
      });
    }
  }
  for (const lists of queues.values()) for (const l of lists) if (l.length) dropped.cell_full = (dropped.cell_full ?? 0) + l.length;
  kept.sort((a, b) => ARCHETYPES.indexOf(a.archetype as never) - ARCHETYPES.indexOf(b.archetype as never) || DIFFICULTIES.indexOf(a.difficulty as never) - DIFFICULTIES.indexOf(b.difficulty as never) || (a.id < b.id ? -1 : 1));
  return { tasks: kept, candidates: all.length, dropped, templates: templates.length };
}

/**
 * Runs each distinct gold query (one per normalised SQL) twice; returns normalised SQL ->
 * the reason it fails verification (judgeResult's, or "all_zero" when every cell is NULL or 0), null when good.
 */
export async function verifyGoldQueries(dbPath: string, executor: Executor, sqls: string[], onProgress?: (phase: string, done: number, total: number) => void): Promise<Map<string, string | null>> {
  const distinct = [...new Set(sqls.map((s) => sqlDuplicateKey(s)))];
  const sqlOf = new Map(sqls.map((s) => [sqlDuplicateKey(s), s]));
  let done = 0;
  const verdicts = new Map<string, string | null>();
  await mapLimit(distinct, 16, async (key) => {
    const sql = sqlOf.get(key) as string;
    const o = { timeoutMs: 10000, maxRows: MAX_GOLD_ROWS + 1 };
    const first = await executor.execute(dbPath, sql, o);
    const second = first.ok ? await executor.execute(dbPath, sql, o) : first;
    const bad = judgeResult(first, second);
    let reason: string | null = bad ? bad.reason : null;
    if (!reason && first.ok && first.rows.every((r) => r.every((v) => v === null || v === 0))) reason = "all_zero";
    verdicts.set(key, reason);
    onProgress?.("verify", ++done, distinct.length);
  });
  return verdicts;
}
