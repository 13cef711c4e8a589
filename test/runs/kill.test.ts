import { test } from "node:test";
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { readFileSync, statSync } from "node:fs";
import { join } from "node:path";
import { runCli, scratchDir, t2sBin } from "../helpers.js";
import { startFakeOpenAI } from "../support/fake-openai.js";
import { ITEM_TASKS, fenced, makeItemsDb, writeItemTasks } from "../support/fixtures.js";
import { sampleSeed } from "../../lib/runs/plan.js";
import type { RolloutRow } from "../../lib/runs/row.js";
import { mulberry32 } from "../../lib/core/random.js";


const sizeOf = (path: string) => {
  try {
    return statSync(path).size;
  } catch {
    return 0;
  }
};

/**
 * Spawns the command and SIGKILLs it `ms` after its first new row lands (start-up time varies with load,
 * so the clock starts at the first write); resolves with its exit code or signal.
 */
function runAndKill(args: string[], rowsPath: string, ms: number): Promise<string> {
  return new Promise((resolve) => {
    const start = sizeOf(rowsPath);
    const child = spawn(process.execPath, [t2sBin, ...args], { stdio: "ignore" });
    let timer: NodeJS.Timeout | undefined;
    const poll = setInterval(() => {
      if (sizeOf(rowsPath) > start) {
        clearInterval(poll);
        timer = setTimeout(() => child.kill("SIGKILL"), ms);
      }
    }, 10);
    child.on("exit", (code, signal) => {
      clearInterval(poll);
      clearTimeout(timer);
      resolve(signal ?? String(code));
    });
  });
}

test("SIGKILL at random moments, then re-running: exactly k rows per task, no duplicates, the same draws", async () => {
  // the reply depends only on the request's seed: even seeds get the gold query, odd ones a wrong one
  const gold = new Map(ITEM_TASKS.map((t) => [t.question, t.gold_sql]));
  const server = await startFakeOpenAI(async (req) => {
    await new Promise((r) => setTimeout(r, 60 + (Number(req.body.seed) % 20)));
    return { content: fenced(Number(req.body.seed) % 2 === 0 ? gold.get(req.question)! : "SELECT 0") };
  });
  const dir = scratchDir();
  makeItemsDb(dir);
  const tasks = writeItemTasks(dir);
  const out = join(dir, "rows.jsonl");
  const k = 8;
  const args = ["benchmark", "--policy", `openai:fake@${server.baseUrl}`, "--tasks", tasks, "--out", out, "--k", String(k), "--seed", "11", "--concurrency", "2", "--workers", "1", "--quiet"];
  // the kill delays are random but seeded, so a failure can be replayed
  const random = mulberry32(20261129);
  const outcomes: string[] = [];
  try {
    for (let i = 0; i < 5; i++) outcomes.push(await runAndKill(args, out, Math.floor(random() * 400)));
    assert.ok(outcomes.filter((o) => o === "SIGKILL").length >= 3, `too few runs were killed mid-way: ${outcomes.join(", ")}`);
    const last = await runCli([...args, "--json"]);
    assert.equal(last.code, 0, last.stderr);
    const lines = readFileSync(out, "utf8").split("\n");
    assert.equal(lines.pop(), "", "the rows file ends with a newline");
    const rows = lines.map((l) => JSON.parse(l) as RolloutRow);
    const keys = rows.map((r) => `${r.task_id}/${r.sample}`);
    assert.equal(new Set(keys).size, keys.length, "no duplicate (task, sample)");
    assert.equal(rows.length, ITEM_TASKS.length * k);
    for (const t of ITEM_TASKS) {
      const mine = rows.filter((r) => r.task_id === t.id).map((r) => r.sample).sort((a, b) => a - b);
      assert.deepEqual(mine, Array.from({ length: k }, (_, s) => s), `task ${t.id} has samples 0..${k - 1}`);
    }
    for (const r of rows) {
      assert.equal(r.seed, sampleSeed(11, "0", r.task_id, r.sample));
      assert.equal(r.correct, r.seed % 2 === 0, `row ${r.task_id}/${r.sample} graded as its seed dictates`);
    }
    const report = JSON.parse(last.stdout);
    assert.equal(report.summary.n_rows, ITEM_TASKS.length * k);
    assert.equal(report.progress.landed, ITEM_TASKS.length * k);
  } finally {
    await server.close();
  }
});
