/** Synthetic rollout rows for report tests: seeded, with every outcome, several difficulties/archetypes and eval runs. */
import { writeFileSync } from "node:fs";
import { mulberry32 } from "../../lib/core/random.js";
import type { ReportRow } from "../../lib/report/rows.js";

export interface FixtureOptions {
  tasks?: number;
  k?: number;
  runs?: number;
  seed?: number;
  /** Added to every task's success probability (an "after training" file). */
  lift?: number;
  policy?: string;
}

const DIFFS = ["easy", "medium", "hard"];
const ARCHS = ["single-table aggregation", "two-table JOIN", "NULL semantics", "top-N"];
const FAILS = ["wrong_rows", "sql_error", "no_sql", "truncated"] as const;

/** Returns rows for `tasks` tasks x `runs` eval runs x `k` samples; task i's success chance depends on its difficulty. */
export function makeRows(opts: FixtureOptions = {}): ReportRow[] {
  const rand = mulberry32(opts.seed ?? 1);
  const taskRand = mulberry32(7);
  const out: ReportRow[] = [];
  const n = opts.tasks ?? 24;
  const base = Array.from({ length: n }, (_, i) => Math.max(0, Math.min(1, [0.8, 0.5, 0.2][i % 3] + (taskRand() - 0.5) * 0.6)));
  for (let run = 0; run < (opts.runs ?? 1); run++) {
    for (let i = 0; i < n; i++) {
      const p = Math.min(1, base[i] + (opts.lift ?? 0));
      for (let s = 0; s < (opts.k ?? 4); s++) {
        const correct = rand() < p;
        const outcome = correct ? ("correct" as const) : FAILS[Math.floor(rand() * FAILS.length)];
        const sql = outcome === "no_sql" ? null : outcome === "sql_error" ? "SELEC name FROM items" : "SELECT name FROM items";
        out.push({
          run_id: "fixture", eval_run: String(run), task_id: `task_${String(i).padStart(3, "0")}`, db_id: "items", split: "holdout",
          difficulty: DIFFS[i % 3], archetype: ARCHS[i % 4], sample: s, policy: opts.policy ?? "scripted:fixture", model: "fixture", adapter: null,
          turns: [
            { role: "user", content: `Question ${i}?` },
            { role: "assistant", content: sql ? "```sql\n" + sql + "\n```" : "I cannot answer." },
          ],
          n_assistant_turns: 1, graded_turn: 1, final_sql: sql, outcome, correct, executes: outcome === "correct" || outcome === "wrong_rows",
          has_sql: sql !== null, reward: correct ? 1 : outcome === "wrong_rows" ? 0.1 : 0, reason: correct ? "result matches (1 rows)" : `${outcome} happened`,
          tokens_in: 100, tokens_out: 20 + (i % 5), finish_reason: outcome === "truncated" ? "length" : "stop", latency_ms: 5, n_tool_calls: 0, invalid_tool_calls: 0,
        });
      }
    }
  }
  return out;
}

/** Writes rows as jsonl and returns the path. */
export function writeRows(path: string, rows: ReportRow[]): string {
  writeFileSync(path, rows.map((r) => JSON.stringify(r)).join("\n") + "\n");
  return path;
}

/** Returns a train_log.jsonl-like list of step records. */
export function makeTrainLog(steps = 6): Array<Record<string, unknown>> {
  return Array.from({ length: steps }, (_, step) => ({
    step, reward_mean: 0.3 + step * 0.05, frac_reward_zero_std: 0.4 - step * 0.03, kl: step * 0.002, entropy: 1.2 - step * 0.05,
    completion_length_mean: 40 + step, clip_ratio_region: 0.01 * step, ...(step % 3 === 2 ? { eval_pass1: 0.4 + step * 0.02 } : {}),
  }));
}
