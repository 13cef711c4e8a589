import { test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { benchmark } from "../../lib/runs/benchmark.js";
import { formatLongContext, longContextProbe, parseLevels } from "../../lib/runs/long-context.js";
import { modelTurns, type RolloutRow } from "../../lib/runs/row.js";
import { readMeta } from "../../lib/runs/meta.js";
import { behaviourProfile } from "../../lib/report/behaviour.js";
import { promptIds } from "../../lib/model/chat-prompt.js";
import { loadTokenizer } from "../../lib/model/tokenizer.js";
import { readTasks } from "../../lib/tasks/io.js";
import type { ChatMessage, Completion, Policy } from "../../lib/policy/types.js";
import { runCli, scratchDir } from "../helpers.js";

const TASKS = "data/shop/tasks.jsonl";
const holdout = readTasks(TASKS).filter((t) => t.split === "holdout").slice(0, 3);
const tok = loadTokenizer("data/models/shop-sql-4m-tool");
const count = (messages: ChatMessage[]) => promptIds(tok, messages).length;
const rowsOf = (path: string) => readFileSync(path, "utf8").split("\n").filter(Boolean).map((l) => JSON.parse(l) as RolloutRow);

/**
 * A policy that counts prompts as the shipped 2,048-token model does and answers each question with its
 * task's gold query, so every grade is "correct" and only the padding is under test.
 */
function goldPolicy(opts: { counts?: boolean } = {}): Policy & { prompts: ChatMessage[][] } {
  const prompts: ChatMessage[][] = [];
  return {
    name: "gold-answers",
    model: "shop-sql-4m-tool",
    adapter: null,
    prompts,
    async complete(messages): Promise<Completion[]> {
      prompts.push([...messages]);
      const q = messages.find((m) => m.role === "user")?.content ?? "";
      const task = holdout.find((t) => q.startsWith(t.question.trim()))!;
      return [{ text: "```sql\n" + task.gold_sql + "\n```", tool_calls: [], finish_reason: "stop", tokens_in: count(messages), tokens_out: 30, latency_ms: 1 }];
    },
    ...(opts.counts === false ? {} : { promptTokens: async (m: ChatMessage[]) => count(m), contextWindow: () => 2048 }),
  };
}

const common = { tasks: holdout, k: 2, workers: 1, concurrency: 2, seed: 1, sampling: { max_tokens: 200 } };

test("benchmark --pad-context: rows and metadata record the level; padding sits between question and reply, the same for every sample", async () => {
  const out = join(scratchDir(), "pad.jsonl");
  const policy = goldPolicy();
  const r = await benchmark({ ...common, policy, out, padContext: 1000, padSeed: 1 });
  const rows = rowsOf(out);
  assert.equal(rows.length, 6);
  for (const row of rows) {
    assert.equal(row.pad_context, 1000);
    assert.ok(row.pad_calls! >= 3, `${row.pad_calls} padding calls`);
    assert.ok(row.tokens_in <= 1000 && row.tokens_in >= 900, `prompt of ${row.tokens_in} tokens`);
    assert.equal(row.correct, true);
    assert.equal(row.graded_turn, 1);
    assert.equal(row.n_assistant_turns, 1);
    assert.equal(row.n_tool_calls, 0, "the padding's calls are not the model's");
    assert.equal(row.turns.length, 1 + 2 * row.pad_calls! + 1);
    assert.deepEqual(modelTurns(row).map((m) => m.role), ["user", "assistant"]);
  }
  for (const t of holdout) {
    const [a, b] = rows.filter((x) => x.task_id === t.id);
    assert.deepEqual(a.turns.slice(0, -1), b.turns.slice(0, -1), "both samples saw the same padding");
  }
  assert.deepEqual(r.result.meta.padding, { tokens: 1000, seed: 1 });
  assert.deepEqual(readMeta(`${out}.meta.json`)!.tool_output, { max_rows: 20, max_chars: 256, mode: "middle" });
  // the model's behaviour is read from its own turns: the padding's calls are not counted as its tool use
  const profile = behaviourProfile(rows);
  assert.equal(profile.with_tool_call, 0);
  assert.equal(profile.tool_calls, 0);
  assert.equal(profile.tool_errors, 0);
  // another level is another experiment: it does not go into the same rows file
  await assert.rejects(benchmark({ ...common, policy, out, padContext: 1500, padSeed: 1 }), /padding: \{"tokens":1000,"seed":1\} -> \{"tokens":1500,"seed":1\}/);
});

test("a padding level that leaves no room for a whole reply, tool style, or a policy that cannot count tokens: clear usage errors", async () => {
  const out = join(scratchDir(), "x.jsonl");
  await assert.rejects(benchmark({ ...common, policy: goldPolicy(), out, padContext: 2000 }), (e: Error & { code?: string }) => {
    assert.equal(e.code, "usage");
    assert.match(e.message, /padding to 2000 tokens \(--pad-context, --levels\) plus --max-tokens 200 passes the 2048-token context of shop-sql-4m-tool: the highest level that leaves room for a whole reply is 1848/);
    return true;
  });
  await assert.rejects(benchmark({ ...common, policy: goldPolicy(), out, padContext: 3000, sampling: { max_tokens: 2048 } }), /--max-tokens alone fills it/);
  await assert.rejects(benchmark({ ...common, policy: goldPolicy(), out, padContext: 1000, style: "tool" }), /pads single-style episodes/);
  await assert.rejects(benchmark({ ...common, policy: goldPolicy({ counts: false }), out, padContext: 1000 }), /cannot do; pad with a tfjs:<model dir> policy/);
});

test("the long-context probe: one rows file per level, the same sample seeds at every level, one table", async () => {
  const outDir = scratchDir();
  const policy = goldPolicy();
  const r = await longContextProbe({ ...common, k: 1, policy, outDir, levels: parseLevels("0,700,max"), padSeed: 2 });
  assert.deepEqual(r.levels.map((l) => l.level), [0, 700, 1848]);
  const [none, mid, top] = r.levels;
  assert.equal(none.pad_calls, 0);
  assert.ok(none.prompt_tokens.max! < 700);
  assert.ok(mid.prompt_tokens.min! > none.prompt_tokens.max! && mid.prompt_tokens.max! <= 700);
  assert.ok(top.prompt_tokens.min! > 1700 && top.prompt_tokens.max! <= 1848);
  for (const l of r.levels) {
    assert.equal(l.pass1, 1);
    assert.equal(l.n_tasks, 3);
    assert.equal(l.rows_file, join(outDir, `pad-${l.level}.jsonl`));
  }
  assert.equal(top.delta, 0);
  const seeds = (level: number) => rowsOf(join(outDir, `pad-${level}.jsonl`)).map((x) => `${x.task_id}:${x.seed}`).sort();
  assert.deepEqual(seeds(700), seeds(0));
  assert.deepEqual(seeds(1848), seeds(0));
  const text = formatLongContext(r);
  assert.match(text, /^gold-answers: single style/);
  assert.match(text, /\n\s*none\s+\d+ \[\d+, \d+\]\s+0\.0\s+1\.000/);
  assert.match(text, /\n\s*1848\s+18\d\d \[/);
  // a resumed probe asks nothing new
  const asked = policy.prompts.length;
  await longContextProbe({ ...common, k: 1, policy, outDir, levels: [0, 700, "max"], padSeed: 2 });
  assert.equal(policy.prompts.length, asked);
  // a seeded subset reads the same files: its table covers only the tasks drawn
  const sub = await longContextProbe({ ...common, k: 1, policy, outDir, levels: [0, 700], padSeed: 2, sample: { n: 2, seed: 1 } });
  assert.deepEqual(sub.levels.map((l) => l.n_tasks), [2, 2]);
  assert.equal(policy.prompts.length, asked);
});

test("t2s probe long-context and t2s benchmark --pad-context: bad levels are one usage line, not a stack trace", async () => {
  const dir = scratchDir();
  const probe = ["probe", "long-context", "--policy", "tfjs:data/models/shop-sql-4m-tool", "--tasks", TASKS, "--out-dir", dir];
  for (const [args, message] of [
    [[...probe, "--levels", "0,1000,2000"], /^error \[usage\]: padding to 2000 tokens \(--pad-context, --levels\) plus --max-tokens 200 passes the 2048-token context of shop-sql-4m-tool: the highest level that leaves room for a whole reply is 1848/],
    [[...probe, "--levels", "0,abc"], /^error \[usage\]: --levels: 'abc' is not a token count/],
    [[...probe, "--levels", "0,0"], /names a level twice/],
    [["benchmark", "--policy", "tfjs:data/models/shop-sql-4m-tool", "--tasks", TASKS, "--out", join(dir, "b.jsonl"), "--pad-seed", "2"], /^error \[usage\]: --pad-seed chooses the padding queries; it needs --pad-context/],
  ] as Array<[string[], RegExp]>) {
    const r = await runCli(args);
    assert.equal(r.code, 2, r.stderr);
    assert.match(r.stderr, message);
    assert.doesNotMatch(r.stderr, /\n\s+at /);
  }
});

test("the shipped 4M tool model, two tasks: a padded level answers further into the context, and --json gives the table", async () => {
  const dir = scratchDir();
  const r = await runCli(["probe", "long-context", "--policy", "tfjs:data/models/shop-sql-4m-tool", "--tasks", TASKS, "--out-dir", dir, "--levels", "0,600", "--limit", "2", "--concurrency", "2", "--workers", "1", "--json", "--quiet"]);
  assert.equal(r.code, 0, r.stderr);
  const out = JSON.parse(r.stdout) as { policy: string; levels: Array<{ level: number; prompt_tokens: { min: number; max: number }; n_tasks: number; pass1: number }> };
  assert.deepEqual(out.levels.map((l) => [l.level, l.n_tasks]), [[0, 2], [600, 2]]);
  assert.ok(out.levels[1].prompt_tokens.min > out.levels[0].prompt_tokens.max);
  assert.ok(out.levels[1].prompt_tokens.max <= 600);
  const rows = rowsOf(join(dir, "pad-600.jsonl"));
  assert.ok(rows.every((x) => x.pad_context === 600 && x.pad_calls! > 0 && x.tokens_in <= 600));
});
