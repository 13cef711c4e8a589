/**
 * Throughput of the SQL sandbox on the shop database: queries per second for simple lookups and for
 * joins, through the executor pool with 1 and N worker processes (N = CPUs), and in-process without
 * isolation as the ceiling. Run with `npm run bench:db` (options: --seconds S per cell, --workers N).
 */
import { cpus } from "node:os";
import { performance } from "node:perf_hooks";
import { ConnectionCache } from "../lib/db/connection.js";
import { ExecutorPool } from "../lib/db/pool.js";
import { DEFAULT_MAX_RESULT_BYTES, runQuery } from "../lib/db/run.js";
import { defaultShopPath } from "../lib/db/shop/build.js";
import type { ExecOutcome } from "../lib/db/types.js";

const args = process.argv.slice(2);
const argValue = (flag: string, dflt: number) => {
  const i = args.indexOf(flag);
  return i >= 0 ? Number(args[i + 1]) : dflt;
};
const SECONDS = argValue("--seconds", 2);
const N = argValue("--workers", Math.max(2, cpus().length));
const db = defaultShopPath();

const WORKLOADS: Record<string, (i: number) => string> = {
  lookup: (i) => `SELECT first_name, last_name, country FROM customers WHERE customer_id = ${(i % 80) + 1}`,
  join: (i) =>
    `SELECT c.name, count(DISTINCT o.order_id) AS orders, round(sum(i.quantity * i.unit_price), 2) AS revenue
     FROM orders o JOIN order_items i ON i.order_id = o.order_id JOIN products p ON p.product_id = i.product_id
     JOIN categories c ON c.category_id = p.category_id
     WHERE o.status IN ('paid', 'shipped', 'delivered') AND o.order_date >= '${2023 + (i % 3)}-01-01'
     GROUP BY c.name ORDER BY revenue DESC`,
};

interface Cell {
  qps: number;
  p50: number;
  p95: number;
}

function summarize(latencies: number[], seconds: number): Cell {
  const sorted = latencies.slice().sort((a, b) => a - b);
  const at = (q: number) => sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))];
  return { qps: latencies.length / seconds, p50: at(0.5), p95: at(0.95) };
}

/** Keeps `concurrency` queries in flight for SECONDS and records each call's latency. */
async function drive(run: (sql: string) => Promise<ExecOutcome>, make: (i: number) => string, concurrency: number): Promise<Cell> {
  const latencies: number[] = [];
  const end = performance.now() + SECONDS * 1000;
  let i = 0;
  const lane = async () => {
    while (performance.now() < end) {
      const t = performance.now();
      const o = await run(make(i++));
      if (!o.ok) throw new Error(`benchmark query failed: ${o.error.kind}: ${o.error.message}`);
      latencies.push(performance.now() - t);
    }
  };
  const t0 = performance.now();
  await Promise.all(Array.from({ length: concurrency }, lane));
  return summarize(latencies, (performance.now() - t0) / 1000);
}

async function main(): Promise<void> {
  const rows: string[][] = [];
  const cache = new ConnectionCache();
  for (const [name, make] of Object.entries(WORKLOADS)) {
    await drive(async (sql) => runQuery(cache, db, sql, { maxRows: 200, maxResultBytes: DEFAULT_MAX_RESULT_BYTES }), make, 1);
    const c = await drive(async (sql) => runQuery(cache, db, sql, { maxRows: 200, maxResultBytes: DEFAULT_MAX_RESULT_BYTES }), make, 1);
    rows.push([name, "in-process", "1", c.qps.toFixed(0), c.p50.toFixed(2), c.p95.toFixed(2)]);
  }
  cache.close();
  for (const workers of [1, N]) {
    const pool = new ExecutorPool({ workers, spareWorkers: 0 });
    await pool.ready();
    for (const [name, make] of Object.entries(WORKLOADS)) {
      const concurrency = workers * 4;
      await drive((sql) => pool.execute(db, sql), make, concurrency); // warm: connections, statement caches
      const c = await drive((sql) => pool.execute(db, sql), make, concurrency);
      rows.push([name, `pool (${workers} worker${workers === 1 ? "" : "s"})`, String(concurrency), c.qps.toFixed(0), c.p50.toFixed(2), c.p95.toFixed(2)]);
    }
    await pool.close();
  }
  const header = ["workload", "executor", "in flight", "queries/s", "p50 ms", "p95 ms"];
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => r[i].length)));
  const fmt = (r: string[]) => `| ${r.map((v, i) => (i >= 2 ? v.padStart(widths[i]) : v.padEnd(widths[i]))).join(" | ")} |`;
  process.stdout.write(`shop database ${db}\n${cpus().length} CPUs, ${SECONDS} s per cell, Node ${process.version}\n\n`);
  process.stdout.write([fmt(header), `|${widths.map((w) => "-".repeat(w + 2)).join("|")}|`, ...rows.map(fmt)].join("\n") + "\n");
}

main().catch((e) => {
  process.stderr.write(`${e instanceof Error ? e.stack : String(e)}\n`);
  process.exit(1);
});
