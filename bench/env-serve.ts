/**
 * `npm run bench:env`: grades per second through `t2s env serve`'s HTTP endpoint with C concurrent clients
 * (default 16), beside in-process grade() on the same SQL workers and gold cache, in one run. Each grade
 * extracts the query from a fenced reply, runs it and compares it with the (cached) gold, as
 * `npm run bench:grade`'s "cached" rows. The service listens on 127.0.0.1 only. A second table times the
 * service under the attacks of bench/env-attacks.ts: another client's one-item grade beside a flood or after
 * a client left with runaways, /health while a large database is hashed, a grade whose worker is killed,
 * and reads of a WAL database a writer keeps committing to. Options:
 *   --grades <n>    grades per row (default 2000)
 *   --clients <n>   concurrent HTTP clients (default 16)
 *   --workers <n>   SQL worker processes (default: number of CPUs)
 *   --batch <n>     items per request of the batched row (default 16)
 *   --flood <n>     items of the flooding and of the leaving client (default 64)
 *   --hash-mb <n>   size of the database hashed while /health is timed (default 800)
 *   --only-attacks  skip the throughput table
 */
import { existsSync } from "node:fs";
import { cpus } from "node:os";
import { ExecutorPool } from "../lib/db/pool.js";
import { buildShopDatabase, defaultShopPath } from "../lib/db/shop/build.js";
import { EnvService } from "../lib/envserve/service.js";
import { startEnvServer } from "../lib/envserve/server.js";
import { kitPath } from "../lib/core/paths.js";
import { readTasks } from "../lib/tasks/io.js";
import { grade } from "../lib/verifier/grade.js";
import { intFlag, printTable } from "./args.js";
import { attackRows } from "./env-attacks.js";

async function main(): Promise<void> {
  if (!process.argv.includes("--only-attacks")) await throughput();
  process.stdout.write("\nunder attack (2 SQL workers, 4 grades in flight, query timeout 60 s):\n\n");
  printTable(["case", "measure", "value"], await attackRows({ flood: intFlag("--flood", 64), hashMb: intFlag("--hash-mb", 800) }));
}

async function throughput(): Promise<void> {
  const grades = intFlag("--grades", 2000);
  const clients = intFlag("--clients", 16);
  const workers = intFlag("--workers", Math.max(2, cpus().length));
  const batch = intFlag("--batch", 16);
  const db = defaultShopPath();
  if (!existsSync(db)) buildShopDatabase(db);
  const tasks = readTasks(kitPath("data", "shop", "tasks.jsonl")).slice(0, 50);
  const reply = (i: number) => "The query:\n```sql\n" + tasks[i % tasks.length].gold_sql + ";\n```";
  const pool = new ExecutorPool({ workers });
  const service = new EnvService({ executor: pool, tasks });
  const server = await startEnvServer({ service, port: 0, host: "127.0.0.1" });
  process.stdout.write(`shop database; ${tasks.length} tasks; ${grades} grades per row; ${workers} SQL workers; ${clients} clients; ${cpus().length} CPUs; ${server.url}\n\n`);
  // warm the workers and the gold cache so neither start-up nor the first gold runs are timed
  await service.gradeBatch({ items: tasks.map((t, i) => ({ task_id: t.id, pred: reply(i) })) });

  const rows: string[][] = [];
  const time = async (label: string, per: number, lanes: number, job: (from: number, n: number) => Promise<number>) => {
    let next = 0;
    let correct = 0;
    const t0 = performance.now();
    await Promise.all(Array.from({ length: lanes }, async () => {
      while (next < grades) {
        const from = next;
        const n = Math.min(per, grades - from);
        next += n;
        const got = await job(from, n); // not `correct += await ...`: that reads `correct` before the await
        correct += got;
      }
    }));
    const s = (performance.now() - t0) / 1000;
    rows.push([label, String(lanes), String(per), String(grades), s.toFixed(2), (grades / s).toFixed(0), `${correct}/${grades}`]);
  };
  const http = async (from: number, n: number) => {
    const items = Array.from({ length: n }, (_, k) => ({ task_id: tasks[(from + k) % tasks.length].id, pred: reply(from + k) }));
    const res = await fetch(`${server.url}/v1/grade`, { method: "POST", body: JSON.stringify({ items }), headers: { "content-type": "application/json" } });
    const body = (await res.json()) as { results: Array<{ correct?: boolean }> };
    return body.results.filter((r) => r.correct).length;
  };
  await time("in-process grade()", 1, clients, async (from) => ((await grade(tasks[from % tasks.length], reply(from), { executor: pool, goldCache: service.goldCache })).correct ? 1 : 0));
  await time("HTTP /v1/grade", 1, clients, http);
  await time("HTTP /v1/grade", batch, clients, http);
  await server.close();
  await pool.close();
  const head = ["path", "clients", "items/request", "grades", "seconds", "grades/s", "correct"];
  printTable(head, rows);
}

main().catch((e) => {
  process.stderr.write(`${e instanceof Error ? e.message : String(e)}\n`);
  process.exit(1);
});
