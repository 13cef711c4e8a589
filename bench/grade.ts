/**
 * `npm run bench:grade`: grading speed, end to end and inside the process.
 *
 * 1. End to end against the Python reference grader (../shared/reference/refgrader.py beside the clone, or
 *    --reference <path>; python3's sqlite3, the kit's default rules; a clone without it skips this table
 *    and the reference's start-up row with a note), side by side in one run on the same pairs: shop golds, each paired with
 *    itself and with near-miss mutations of itself (bench/grade-pairs.ts). `t2s grade --jsonl` and
 *    `refgrader.py --jsonl` alternate for --runs rounds, each a fresh process reading the pairs on stdin;
 *    the table gives median seconds, grades per second, the ratio, and how many verdicts agree.
 * 2. Start-up: `t2s --version` and `t2s grade --jsonl </dev/null` (median of --runs), and whether the
 *    compiled dist/ was used (it is only when `npm run build` matches lib/; else tsx loads the sources).
 * 3. Inside the process: grades per second with the gold result cached vs run every time, on 1 vs N SQL
 *    worker processes (and with the 3-neighbor check on).
 * Options: --pairs <n> (default 3000), --runs <n> (default 5), --grades <n> (default 600),
 *          --workers <n> (default: number of CPUs), --reference <path> (default ../shared/reference/refgrader.py).
 */
import { spawnSync } from "node:child_process";
import { existsSync } from "node:fs";
import { cpus, loadavg } from "node:os";
import { performance } from "node:perf_hooks";
import { distIsFresh } from "../bin/dist-check.js";
import { ExecutorPool } from "../lib/db/pool.js";
import { buildShopDatabase, defaultShopPath } from "../lib/db/shop/build.js";
import { kitPath } from "../lib/core/paths.js";
import { readTasks } from "../lib/tasks/io.js";
import { grade, type GradableTask } from "../lib/verifier/grade.js";
import { GoldCache } from "../lib/verifier/goldcache.js";
import { flag, intFlag, printTable } from "./args.js";
import { gradePairs } from "./grade-pairs.js";

/** The Python reference grader: not part of the clone, so every use of it is optional. */
const REFERENCE = flag("--reference") ?? kitPath("..", "shared", "reference", "refgrader.py");
const T2S = kitPath("bin", "t2s.js");

/** Why the reference grader cannot run here, or null when it can. */
function referenceMissing(): string | null {
  if (!existsSync(REFERENCE)) return `${REFERENCE} is not here (it is not part of the clone)`;
  if (spawnSync("python3", ["--version"]).status !== 0) return "python3 is not installed";
  return null;
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];

/** Runs a command with `input` on stdin; returns its wall time in seconds and its stdout. */
function timed(cmd: string, args: string[], input: string): { seconds: number; stdout: string } {
  const t0 = performance.now();
  const r = spawnSync(cmd, args, { input, encoding: "utf8", maxBuffer: 256 * 1024 * 1024 });
  const seconds = (performance.now() - t0) / 1000;
  if (r.status !== 0) throw new Error(`${cmd} ${args.join(" ")} exited ${r.status}: ${r.stderr.slice(-500)}`);
  return { seconds, stdout: r.stdout };
}

function shopGolds(): { db: string; golds: string[] } {
  const db = defaultShopPath();
  if (!existsSync(db)) buildShopDatabase(db);
  const golds = [...new Set(readTasks(kitPath("data", "shop", "tasks.jsonl")).map((t) => t.gold_sql))];
  return { db, golds };
}

function endToEnd(db: string, golds: string[], count: number, runs: number): void {
  const pairs = gradePairs(db, golds, count);
  const input = pairs.map((p) => JSON.stringify(p)).join("\n") + "\n";
  const missing = referenceMissing();
  if (missing) {
    process.stdout.write(`end to end against the reference grader: skipped, ${missing}\n\n`);
    return;
  }
  const kit: number[] = [];
  const ref: number[] = [];
  let agree = 0;
  for (let i = 0; i < runs; i++) {
    const k = timed(process.execPath, [T2S, "grade", "--jsonl"], input);
    const r = timed("python3", [REFERENCE, "--jsonl"], input);
    kit.push(k.seconds);
    ref.push(r.seconds);
    if (i === 0) {
      const a = k.stdout.trim().split("\n").map((l) => JSON.parse(l).correct);
      const b = r.stdout.trim().split("\n").map((l) => JSON.parse(l).correct);
      agree = a.filter((v, j) => v === b[j]).length;
    }
  }
  const rate = (s: number) => (pairs.length / s).toFixed(0);
  const mk = median(kit);
  const mr = median(ref);
  process.stdout.write(`end to end: ${pairs.length} pairs (${golds.length} shop golds, each with itself and near-miss mutations), ${runs} alternating runs, median; ${cpus().length} CPUs, load ${loadavg()[0].toFixed(1)}\n`);
  printTable(
    ["grader", "seconds", "grades/s", "runs (s)"],
    [
      ["t2s grade --jsonl", mk.toFixed(2), rate(mk), kit.map((s) => s.toFixed(2)).join(" ")],
      ["refgrader.py --jsonl", mr.toFixed(2), rate(mr), ref.map((s) => s.toFixed(2)).join(" ")],
    ],
  );
  process.stdout.write(`ratio (reference seconds / t2s seconds): ${(mr / mk).toFixed(2)}x; verdicts agree on ${agree}/${pairs.length}\n\n`);
}

function startUp(runs: number): void {
  const fresh = distIsFresh(kitPath("lib"), kitPath("dist"));
  const cases: Array<[string, string[], string]> = [
    ["t2s --version", [T2S, "--version"], ""],
    ["t2s grade --jsonl </dev/null", [T2S, "grade", "--jsonl"], ""],
  ];
  const rows = cases.map(([name, args, input]) => {
    const times = Array.from({ length: runs }, () => timed(process.execPath, args, input).seconds);
    return [name, median(times).toFixed(3), times.map((s) => s.toFixed(2)).join(" ")];
  });
  if (!referenceMissing()) {
    const py = Array.from({ length: runs }, () => timed("python3", [REFERENCE, "--jsonl"], "").seconds);
    rows.push(["refgrader.py --jsonl </dev/null", median(py).toFixed(3), py.map((s) => s.toFixed(2)).join(" ")]);
  }
  process.stdout.write(`start-up (${fresh ? "compiled dist/" : "dist/ missing or stale: sources through tsx; run npm run build"}), median of ${runs}\n`);
  printTable(["command", "seconds", "runs (s)"], rows);
  process.stdout.write("\n");
}

async function inProcess(db: string, golds: string[], grades: number, many: number): Promise<void> {
  const tasks: GradableTask[] = golds.slice(0, 50).map((gold_sql) => ({ db_path: db, gold_sql }));
  const reply = (t: GradableTask) => "The query:\n```sql\n" + t.gold_sql + ";\n```";
  const rows: string[][] = [];
  for (const workers of [1, many]) {
    const pool = new ExecutorPool({ workers });
    await Promise.all(tasks.map((t) => pool.execute(db, t.gold_sql)));
    const configs = [{ cached: false, neighbors: 0 }, { cached: true, neighbors: 0 }, ...(workers === many ? [{ cached: true, neighbors: 3 }] : [])];
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
  process.stdout.write(`inside the process: ${tasks.length} shop golds answered with themselves, ${grades} grades per row\n`);
  printTable(["workers", "gold", "neighbors", "grades", "seconds", "grades/s", "correct"], rows);
}

async function main(): Promise<void> {
  const runs = intFlag("--runs", 5);
  const { db, golds } = shopGolds();
  endToEnd(db, golds, intFlag("--pairs", 3000), runs);
  startUp(runs);
  await inProcess(db, golds, intFlag("--grades", 600), intFlag("--workers", Math.max(2, cpus().length)));
}

main().catch((e) => {
  process.stderr.write(`${e instanceof Error ? e.message : String(e)}\n`);
  process.exit(1);
});
