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
import { HANG_GUARD_MS, repoRoot, runCli, scratchDir } from "../helpers.js";
import { shopTasks, startEnvChild } from "./fixture.js";

const python = spawnSync("python3", ["--version"], { encoding: "utf8" });
const hasPython = python.status === 0;
const PRESETS = ["shaped", "binary", "tool-rl"] as const;

interface Turn {
  text: string;
  calls: Array<Record<string, unknown>>;
  finish?: "length";
}

/**
 * The eight kinds of multi-turn episode (and one more: an unsafe call followed by another in its turn) where a trainer's view (verl's decoded transcript, TRL's message
 * list) and the kit's episode can part: each is played as a real kit episode, and its reward per preset is
 * what the Python side must reproduce from the trainer's view.
 */
function episodeCases(gold: string, otherGold: string): Array<{ name: string; maxToolCalls: number; turns: Turn[] }> {
  const probe = { query: "SELECT COUNT(*) AS n FROM orders" };
  const fence = { query: "SELECT '```sql' || char(10) || 'SELECT 1' || char(10) || '```' AS note" };
  const commit = { text: "<solution>" + gold + "</solution>", calls: [] };
  return [
    { name: "correct after a probe", maxToolCalls: 5, turns: [{ text: "", calls: [probe] }, commit] },
    { name: "prose final answer", maxToolCalls: 5, turns: [{ text: "", calls: [{ query: gold }] }, { text: "The answer is the number shown above.", calls: [] }] },
    { name: "ending on a tool call", maxToolCalls: 1, turns: [{ text: "", calls: [probe] }, { text: "", calls: [{ query: gold }] }] },
    { name: "tool result holding a code fence", maxToolCalls: 5, turns: [{ text: "", calls: [fence] }, { text: "Here is what I found.", calls: [] }] },
    { name: "invalid calls", maxToolCalls: 5, turns: [{ text: "", calls: [{ query: "" }] }, { text: "", calls: [{ sql: "SELECT 1" }] }, commit] },
    { name: "unsafe query", maxToolCalls: 5, turns: [{ text: "", calls: [{ query: "" }] }, { text: "", calls: [{ query: "DELETE FROM customers" }] }, commit] },
    { name: "unsafe query, then an invalid call in the same turn", maxToolCalls: 5, turns: [{ text: "", calls: [{ query: "DROP TABLE orders" }, { query: "" }] }, { text: "", calls: [{ query: "" }] }, commit] },
    { name: "truncated", maxToolCalls: 5, turns: [{ text: "", calls: [probe] }, { text: "<solution>" + gold.slice(0, Math.floor(gold.length / 2)), calls: [], finish: "length" }] },
    { name: "wrong rows after a probe", maxToolCalls: 5, turns: [{ text: "", calls: [probe] }, { text: "```sql\n" + otherGold + "\n```", calls: [] }] },
  ];
}

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

test("TRL- and verl-style Python functions give exactly the rewards of `t2s grade --jsonl` through `t2s env serve`", { skip: hasPython ? false : "python3 is not installed", timeout: 3 * HANG_GUARD_MS }, async () => {
  const all = shopTasks().filter((t) => t.split === "train");
  const rand = mulberry32(20);
  const tasks = all.slice(0, 120);
  const pairs = tasks.flatMap((t, i) => replies(t.gold_sql, all[(i * 7 + 3) % all.length].gold_sql).map((pred) => ({ task_id: t.id, db: t.db_path, gold: t.gold_sql, pred, preset: PRESETS[Math.floor(rand() * 3)] })));
  assert.ok(pairs.length >= 1000);

  const graded = await runCli(["grade", "--jsonl", "--workers", "2"], { input: pairs.map((p) => JSON.stringify({ db: p.db, gold: p.gold, pred: p.pred, preset: p.preset })).join("\n") + "\n", timeoutMs: HANG_GUARD_MS });
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

  // the eight episode kinds, graded by the kit's own episode loop under each preset
  const episodes: Array<{ name: string; task_id: string; db: string; gold: string; turns: Turn[]; expected: Record<string, { reward: number; outcome: string }> }> = [];
  for (const [i, t] of tasks.slice(1, 3).entries()) {
    for (const c of episodeCases(t.gold_sql, all[(i * 11 + 5) % all.length].gold_sql)) {
      const expected: Record<string, { reward: number; outcome: string }> = {};
      for (const preset of PRESETS) {
        const penv = defaultEnv({ executor: pool, prompt: { style: "tool", toolRows: 20 }, preset });
        const script = c.turns.map((turn) => ({ text: turn.text, tool_calls: turn.calls.map((a) => ({ name: "execute_sql_query", arguments: a })), ...(turn.finish ? { finish_reason: turn.finish } : {}) }));
        const e = await runEpisode(await penv.opening(t), { policy: scriptedPolicy([{ replies: script }]), runTool: (q) => penv.runTool(t, q), grade: (r, f) => penv.grade(t, r, f) }, { style: "tool", maxToolCalls: c.maxToolCalls, endOnUnsafeTool: preset === "tool-rl" });
        expected[preset] = { reward: e.grade.reward, outcome: e.grade.outcome };
      }
      episodes.push({ name: c.name, task_id: t.id, db: t.db_path, gold: t.gold_sql, turns: c.turns, expected });
    }
  }
  const byKind = (name: string, preset: string) => episodes.find((e) => e.name === name)!.expected[preset].outcome;
  assert.equal(byKind("prose final answer", "shaped"), "no_sql");
  assert.equal(byKind("ending on a tool call", "binary"), "truncated");
  assert.equal(byKind("unsafe query", "tool-rl"), "unsafe");
  assert.equal(byKind("unsafe query", "shaped"), "correct");
  assert.equal(byKind("truncated", "tool-rl"), "truncated");

  const dir = scratchDir("t2s-envpy-");
  const episodesFile = join(dir, "episodes.json");
  writeFileSync(episodesFile, JSON.stringify(episodes));
  const pairsFile = join(dir, "pairs.jsonl");
  writeFileSync(pairsFile, pairs.map((p, i) => JSON.stringify({ ...p, expected: answers[i].reward })).join("\n") + "\n");
  const toolFile = join(dir, "tool.json");
  writeFileSync(toolFile, JSON.stringify({ task_id: task.id, db: task.db_path, query, expected: expectedTool }));

  const server = await startEnvChild(["--workers", "2"]);
  after(() => server.stop());
  const run = spawnSync("python3", ["-m", "unittest", "-v", "integrations/python/test_t2s_env.py"], {
    cwd: repoRoot, encoding: "utf8", timeout: HANG_GUARD_MS,
    env: { ...process.env, T2S_ENV_URL: server.url, T2S_PAIRS_FILE: pairsFile, T2S_TOOL_FILE: toolFile, T2S_EPISODES_FILE: episodesFile },
  });
  const log = `${run.stdout}\n${run.stderr}`;
  assert.equal(run.status, 0, log);
  assert.doesNotMatch(log, /skipped/, "no python test may skip when the service is up");
  assert.match(log, /Ran [2-9][0-9] tests/);
});
