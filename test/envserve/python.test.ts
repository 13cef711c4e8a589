/**
 * The Python adapters against a real `t2s env serve` on loopback: on 1,200 (reply, gold) pairs the
 * TRL-style and verl-style functions must give exactly the rewards `t2s grade --jsonl` gives, and the
 * verl-style tool the text of an episode's tool turn. Skips only when python3 is absent.
 */
import { test, after } from "node:test";
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { ExecutorPool } from "../../lib/db/pool.js";
import { runEpisode } from "../../lib/episode/loop.js";
import { mulberry32 } from "../../lib/core/random.js";
import { scriptedPolicy } from "../../lib/policy/scripted.js";
import { defaultEnv } from "../../lib/runs/env.js";
import { repoRoot, runCli, scratchDir } from "../helpers.js";
import { shopTasks, startEnvChild } from "./fixture.js";

const python = spawnSync("python3", ["--version"], { encoding: "utf8" });
const hasPython = python.status === 0;
const PRESETS = ["shaped", "binary", "tool-rl"] as const;

/** Ten kinds of reply per task: right in three wrappings, wrong rows, errors, no SQL, unsafe. */
function replies(gold: string, otherGold: string): string[] {
  return [
    "```sql\n" + gold + "\n```",
    "Let me think.\n<solution>" + gold + "</solution>",
    "The answer is " + gold,
    "```sql\n" + otherGold + "\n```",
    "```sql\nSELECT * FROM (" + gold + ") LIMIT 0\n```",
    "```sql\nSELECT nope FROM nowhere\n```",
    "I cannot answer that.",
    "```sql\nDROP TABLE customers\n```",
    "```sql\nSELECT 1\n```",
    "```sql\n" + gold.replace(/^SELECT /i, "SELECT DISTINCT ") + "\n```",
  ];
}

test("TRL- and verl-style Python functions give exactly the rewards of `t2s grade --jsonl` through `t2s env serve`", { skip: hasPython ? false : "python3 is not installed", timeout: 600_000 }, async () => {
  const all = shopTasks().filter((t) => t.split === "train");
  const rand = mulberry32(20);
  const tasks = all.slice(0, 120);
  const pairs = tasks.flatMap((t, i) => replies(t.gold_sql, all[(i * 7 + 3) % all.length].gold_sql).map((pred) => ({ task_id: t.id, db: t.db_path, gold: t.gold_sql, pred, preset: PRESETS[Math.floor(rand() * 3)] })));
  assert.ok(pairs.length >= 1000);

  const graded = await runCli(["grade", "--jsonl", "--workers", "2"], { input: pairs.map((p) => JSON.stringify({ db: p.db, gold: p.gold, pred: p.pred, preset: p.preset })).join("\n") + "\n", timeoutMs: 300_000 });
  assert.equal(graded.code, 0, graded.stderr);
  const answers = graded.stdout.trim().split("\n").map((l) => JSON.parse(l));
  assert.equal(answers.length, pairs.length);
  for (const a of answers) assert.equal(a.error, undefined, a.error);
  const outcomes = new Set(answers.map((a) => a.outcome));
  for (const o of ["correct", "wrong_rows", "sql_error", "no_sql", "unsafe"]) assert.ok(outcomes.has(o), `the pairs cover ${o}`);

  // the tool-turn text of a real episode, for the verl-style tool
  const pool = new ExecutorPool({ workers: 1 });
  after(() => pool.close());
  const task = tasks[0];
  const query = "SELECT * FROM orders";
  const env = defaultEnv({ executor: pool, prompt: { style: "tool", toolRows: 20 } });
  const policy = scriptedPolicy([{ replies: [{ text: "", tool_calls: [{ name: "execute_sql_query", arguments: { query } }] }, "<solution>SELECT 1</solution>"] }]);
  const ep = await runEpisode(await env.opening(task), { policy, runTool: (q) => env.runTool(task, q), grade: (r, f) => env.grade(task, r, f) }, { style: "tool" });
  const expectedTool = ep.messages.find((m) => m.role === "tool")!.content;

  const dir = scratchDir("t2s-envpy-");
  const pairsFile = join(dir, "pairs.jsonl");
  writeFileSync(pairsFile, pairs.map((p, i) => JSON.stringify({ ...p, expected: answers[i].reward })).join("\n") + "\n");
  const toolFile = join(dir, "tool.json");
  writeFileSync(toolFile, JSON.stringify({ task_id: task.id, query, expected: expectedTool }));

  const server = await startEnvChild(["--workers", "2"]);
  after(() => server.stop());
  const run = spawnSync("python3", ["-m", "unittest", "-v", "integrations/python/test_t2s_env.py"], {
    cwd: repoRoot, encoding: "utf8", timeout: 500_000,
    env: { ...process.env, T2S_ENV_URL: server.url, T2S_PAIRS_FILE: pairsFile, T2S_TOOL_FILE: toolFile },
  });
  const log = `${run.stdout}\n${run.stderr}`;
  assert.equal(run.status, 0, log);
  assert.doesNotMatch(log, /skipped/, "no python test may skip when the service is up");
  assert.match(log, /Ran 1[0-9] tests/);
});
