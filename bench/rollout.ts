/**
 * `npm run bench:rollout`: episodes per second of the whole rollout path (HTTP to an OpenAI-compatible
 * server, episode loop, SQL tool on the executor pool, grading, one appended row per episode) against a
 * local fake server that answers at once, at concurrency 1, 4, 16 and 64, for single and tool style.
 * The model is free here, so the figures are the kit's own overhead per episode. Options:
 *   --episodes <n>   episodes per configuration (default 300)
 *   --workers <n>    SQL worker processes (default: number of CPUs)
 */
import { existsSync, mkdtempSync, rmSync } from "node:fs";
import { cpus, tmpdir } from "node:os";
import { join } from "node:path";
import { ExecutorPool } from "../lib/db/pool.js";
import { buildShopDatabase, defaultShopPath } from "../lib/db/shop/build.js";
import type { EpisodeStyle } from "../lib/episode/prompt.js";
import { kitPath } from "../lib/core/paths.js";
import { OpenAIPolicy } from "../lib/policy/openai.js";
import { benchmark } from "../lib/runs/benchmark.js";
import { readTasks } from "../lib/tasks/io.js";
import type { Task } from "../lib/tasks/types.js";
import { startFakeOpenAI } from "../test/support/fake-openai.js";
import { intFlag } from "./args.js";

const GOLDS = [
  ["How many orders were delivered?", "SELECT COUNT(*) FROM orders WHERE status = 'delivered'"],
  ["How many customers are there per country?", "SELECT country, COUNT(*) FROM customers GROUP BY country"],
  ["What is the average review rating?", "SELECT ROUND(AVG(rating), 2) FROM reviews"],
  ["Which five products have the highest margin?", "SELECT name, price - cost AS margin FROM products ORDER BY margin DESC, name LIMIT 5"],
  ["How much was captured per payment method?", "SELECT method, ROUND(SUM(amount), 2) FROM payments WHERE status = 'captured' GROUP BY method"],
  ["How many products does each category have?", "SELECT c.name, COUNT(p.product_id) FROM categories c LEFT JOIN products p ON p.category_id = c.category_id GROUP BY c.category_id"],
];

function shopTasks(db: string): Task[] {
  const file = kitPath("data", "shop", "tasks.jsonl");
  if (existsSync(file)) return readTasks(file).slice(0, 30);
  return GOLDS.map(([question, gold_sql], i) => ({
    id: `bench_${i}`, db_id: "shop", db_path: db, question, gold_sql, difficulty: "easy", archetype: "bench", style: "plain", split: "holdout", source: "bench",
  }));
}

async function main(): Promise<void> {
  const episodes = intFlag("--episodes", 300);
  const workers = intFlag("--workers", Math.max(1, cpus().length));
  const db = defaultShopPath();
  if (!existsSync(db)) buildShopDatabase(db);
  const tasks = shopTasks(db);
  const gold = new Map(tasks.map((t) => [t.question, t.gold_sql]));
  const server = await startFakeOpenAI((req) => {
    const sql = gold.get(req.question.split("\n\nEvidence:")[0]) ?? "SELECT 1";
    if (req.hasTools && req.turn === 0) return { tool_calls: [{ name: "execute_sql_query", arguments: { query: sql } }] };
    return { content: `<solution>${sql}</solution>` };
  });
  const pool = new ExecutorPool({ workers });
  await pool.ready();
  const k = Math.ceil(episodes / tasks.length);
  process.stdout.write(`shop database; ${tasks.length} tasks x k=${k} = ${tasks.length * k} episodes per row; ${workers} SQL workers; ${cpus().length} CPUs; fake server answers at once\n\n`);
  process.stdout.write("| style  | concurrency | episodes | seconds | episodes/s | correct |\n|--------|-------------|----------|---------|------------|---------|\n");
  const dir = mkdtempSync(join(tmpdir(), "t2s-bench-rollout-"));
  try {
    for (const style of ["single", "tool"] as EpisodeStyle[]) {
      for (const concurrency of [1, 4, 16, 64]) {
        const policy = new OpenAIPolicy("fake", server.baseUrl, { concurrency });
        const out = join(dir, `${style}-${concurrency}.jsonl`);
        const t0 = performance.now();
        const r = await benchmark({ policy, tasks, k, out, style, concurrency, executor: pool, by: [] });
        const s = (performance.now() - t0) / 1000;
        await policy.close();
        const n = r.result.rows.length;
        const correct = r.result.rows.filter((x) => x.correct).length;
        process.stdout.write(`| ${style.padEnd(6)} | ${String(concurrency).padStart(11)} | ${String(n).padStart(8)} | ${s.toFixed(2).padStart(7)} | ${(n / s).toFixed(1).padStart(10)} | ${String(correct).padStart(7)} |\n`);
      }
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
    await pool.close();
    await server.close();
  }
}

main().catch((e) => {
  process.stderr.write(`${e instanceof Error ? e.stack ?? e.message : String(e)}\n`);
  process.exit(1);
});
