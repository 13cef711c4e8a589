/**
 * `npm run bench:grade`: grades per second on the shop database, with the gold result cached vs run every
 * time, on 1 vs N SQL worker processes (and, for scale, with the 3-neighbor check on). Each grade extracts
 * the query from a fenced reply, runs it (and the gold unless cached), and compares the result sets.
 * Prints a table; options:
 *   --grades <n>   grades per configuration (default 600)
 *   --workers <n>  N for the multi-worker rows (default: number of CPUs)
 */
import { existsSync } from "node:fs";
import { cpus } from "node:os";
import { ExecutorPool } from "../lib/db/pool.js";
import { buildShopDatabase, defaultShopPath } from "../lib/db/shop/build.js";
import { kitPath } from "../lib/paths.js";
import { readTasks } from "../lib/tasks/io.js";
import { grade, type GradableTask } from "../lib/verifier/grade.js";
import { GoldCache } from "../lib/verifier/goldcache.js";
import { intFlag, printTable } from "./args.js";

const FALLBACK_GOLDS = [
  "SELECT COUNT(*) FROM orders WHERE status = 'delivered'",
  "SELECT c.country, COUNT(*) AS n FROM customers c JOIN orders o ON o.customer_id = c.customer_id GROUP BY c.country ORDER BY n DESC, c.country",
  "SELECT p.name, SUM(oi.quantity) AS units FROM order_items oi JOIN products p ON p.product_id = oi.product_id GROUP BY p.product_id ORDER BY units DESC, p.name LIMIT 10",
  "SELECT strftime('%Y-%m', order_date) AS month, COUNT(*) FROM orders GROUP BY month",
  "SELECT ROUND(AVG(rating), 2) FROM reviews",
  "SELECT e.first_name, e.last_name, COUNT(o.order_id) FROM employees e LEFT JOIN orders o ON o.sales_rep_id = e.employee_id GROUP BY e.employee_id",
  "SELECT name, price - cost AS margin FROM products WHERE discontinued = 0 ORDER BY margin DESC LIMIT 5",
  "SELECT method, ROUND(SUM(amount), 2) FROM payments WHERE status = 'captured' GROUP BY method",
  "SELECT cat.name, COUNT(p.product_id) FROM categories cat LEFT JOIN products p ON p.category_id = cat.category_id GROUP BY cat.category_id",
  "SELECT customer_id, first_name FROM customers WHERE referred_by IS NOT NULL",
];

async function main(): Promise<void> {
  const grades = intFlag("--grades", 600);
  const many = intFlag("--workers", Math.max(2, cpus().length));
  const db = defaultShopPath();
  if (!existsSync(db)) buildShopDatabase(db);
  const taskFile = kitPath("data", "shop", "tasks.jsonl");
  const golds = existsSync(taskFile) ? readTasks(taskFile).slice(0, 50).map((t) => t.gold_sql) : FALLBACK_GOLDS;
  const tasks: GradableTask[] = golds.map((gold_sql) => ({ db_path: db, gold_sql }));
  const reply = (t: GradableTask) => "The query:\n```sql\n" + t.gold_sql + ";\n```";
  process.stdout.write(`shop database ${db}; ${tasks.length} gold queries (${existsSync(taskFile) ? "data/shop/tasks.jsonl" : "built-in"}); ${grades} grades per row; ${cpus().length} CPUs\n\n`);
  const rows: string[][] = [];
  for (const workers of [1, many]) {
    const pool = new ExecutorPool({ workers });
    // warm the workers (connections, statement caches) so start-up is not timed
    await Promise.all(tasks.map((t) => pool.execute(db, t.gold_sql)));
    const configs: Array<{ cached: boolean; neighbors: number }> = [
      { cached: false, neighbors: 0 },
      { cached: true, neighbors: 0 },
      ...(workers === many ? [{ cached: true, neighbors: 3 }] : []),
    ];
    for (const { cached, neighbors } of configs) {
      const cache = new GoldCache();
      if (cached) await Promise.all(tasks.map((t) => grade(t, reply(t), { executor: pool, goldCache: cache, neighbors })));
      let next = 0;
      let correct = 0;
      const t0 = performance.now();
      const lane = async () => {
        while (next < grades) {
          const t = tasks[next++ % tasks.length];
          const r = await grade(t, reply(t), { executor: pool, goldCache: cached ? cache : false, neighbors });
          if (r.correct) correct++;
        }
      };
      await Promise.all([...Array(workers * 4)].map(lane));
      const seconds = (performance.now() - t0) / 1000;
      rows.push([String(workers), cached ? "cached" : "run each time", String(neighbors), String(grades), seconds.toFixed(2), (grades / seconds).toFixed(0), `${correct}/${grades}`]);
    }
    await pool.close();
  }
  const head = ["workers", "gold", "neighbors", "grades", "seconds", "grades/s", "correct"];
  printTable(head, rows);
}

main().catch((e) => {
  process.stderr.write(`${e instanceof Error ? e.message : String(e)}\n`);
  process.exit(1);
});
