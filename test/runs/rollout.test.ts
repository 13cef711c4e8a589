import { test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { runRollout, type RolloutEnv, type RolloutOptions } from "../../lib/runs/rollout.js";
import { metaPath, readMeta } from "../../lib/runs/meta.js";
import { scriptedPolicy } from "../../lib/policy/scripted.js";
import { PolicyError, type Policy } from "../../lib/policy/types.js";
import type { RolloutRow } from "../../lib/runs/row.js";
import type { Task } from "../../lib/tasks/types.js";
import type { ProgressSnapshot } from "../../lib/runs/progress.js";
import { scratchDir } from "../helpers.js";
import { readStatRows } from "../../lib/stats/rows.js";
import { summarize } from "../../lib/stats/summary.js";

const task = (id: string) => ({ id, db_id: "d", db_path: "/x", question: `question ${id}`, gold_sql: "SELECT 42", difficulty: "easy", archetype: "count", style: "terse", split: "holdout", source: "t" }) as Task;
const tasks = ["t1", "t2", "t3"].map(task);

const env: RolloutEnv = {
  opening: (t) => [{ role: "system", content: "sys" }, { role: "user", content: t.question }],
  runTool: async () => ({ ok: true, columns: ["n"], rows: [[42]], elapsedMs: 0, truncated: false }),
  grade: async (_t, reply, facts) => {
    const sql = /```sql\s*([\s\S]*?)```/.exec(reply)?.[1].trim() ?? null;
    const correct = sql === "SELECT 42" && facts.finishReason !== "length";
    return { correct, executes: sql !== null, outcome: correct ? "correct" : sql ? "wrong_rows" : "no_sql", reason: "", reward: correct ? 1 : 0, sql };
  },
};

const policy = scriptedPolicy([{ match: "t2", replies: ["```sql\nSELECT 1\n```"] }, { replies: ["```sql\nSELECT 42\n```"] }], "scripted:test");
const opts = (out: string, extra: Partial<RolloutOptions> = {}): RolloutOptions => ({ out, k: 2, promptHash: "ph", episode: { style: "single", sampling: { temperature: 0.7 } }, concurrency: 2, ...extra });
const rowsOf = (path: string) => readFileSync(path, "utf8").split("\n").filter(Boolean).map((l) => JSON.parse(l) as RolloutRow);

test("a rollout writes k rows per task with the row fields, and a sidecar", async () => {
  const out = join(scratchDir(), "rows.jsonl");
  const snaps: ProgressSnapshot[] = [];
  const r = await runRollout(tasks, policy, env, opts(out, { onProgress: (s) => snaps.push(s), progressIntervalMs: 0 }));
  assert.equal(r.rows.length, 6);
  const rows = rowsOf(out);
  assert.equal(rows.length, 6);
  const t2 = rows.filter((x) => x.task_id === "t2");
  assert.ok(t2.every((x) => !x.correct && x.outcome === "wrong_rows"));
  assert.ok(rows.filter((x) => x.task_id !== "t2").every((x) => x.correct));
  const one = rows[0];
  for (const f of ["run_id", "eval_run", "task_id", "db_id", "split", "difficulty", "archetype", "sample", "policy", "model", "adapter", "style", "turns", "n_assistant_turns", "graded_turn", "final_sql", "outcome", "correct", "executes", "has_sql", "reward", "reason", "tokens_in", "tokens_out", "finish_reason", "latency_ms"]) {
    assert.ok(f in one, `row lacks ${f}`);
  }
  assert.equal(one.turns[0].role, "user");
  assert.equal(one.n_assistant_turns, 1);
  const meta = readMeta(metaPath(out));
  assert.equal(meta?.policy, "scripted:test");
  assert.equal(meta?.run_id, one.run_id);
  assert.equal(snaps.at(-1)?.landed, 6);
  assert.equal(snaps.at(-1)?.done, true);
});

test("re-running tops up (k grows) without duplicating; a different setup is refused unless forced", async () => {
  const out = join(scratchDir(), "rows.jsonl");
  await runRollout(tasks, policy, env, opts(out));
  const r = await runRollout(tasks, policy, env, opts(out, { k: 3 }));
  assert.equal(r.progress.resumed, 6);
  assert.equal(r.rows.length, 9);
  const keys = rowsOf(out).map((x) => `${x.task_id}/${x.sample}`);
  assert.equal(new Set(keys).size, keys.length);
  await assert.rejects(runRollout(tasks, policy, env, opts(out, { episode: { style: "single", sampling: { temperature: 1.0 } } })), /different setup \(temperature: 0.7 -> 1\).*--force/);
  const forced = await runRollout(tasks, policy, env, opts(out, { k: 3, force: true, episode: { style: "single", sampling: { temperature: 1.0 } } }));
  assert.equal(forced.progress.landed, 9);
  assert.deepEqual(readMeta(metaPath(out))?.forced, ["temperature: 0.7 -> 1"]);
});

test("a partly done task and a torn tail: resume fills exactly the missing samples", async () => {
  const out = join(scratchDir(), "rows.jsonl");
  await runRollout(tasks, policy, env, opts(out));
  const rows = rowsOf(out);
  // keep t1 sample 1 and everything of t3; lose the rest; tear the last line
  const kept = rows.filter((x) => (x.task_id === "t1" && x.sample === 1) || x.task_id === "t3");
  writeFileSync(out, kept.map((x) => JSON.stringify(x)).join("\n") + "\n" + JSON.stringify(rows[0]).slice(0, 30));
  const r = await runRollout(tasks, policy, env, opts(out));
  assert.equal(r.tornBytes, 30);
  assert.equal(r.progress.resumed, 3);
  const after = rowsOf(out);
  assert.deepEqual(after.map((x) => `${x.task_id}/${x.sample}`).sort(), ["t1/0", "t1/1", "t2/0", "t2/1", "t3/0", "t3/1"]);
  const seedOf = (rs: RolloutRow[], id: string, s: number) => rs.find((x) => x.task_id === id && x.sample === s)?.seed;
  assert.equal(seedOf(after, "t2", 1), seedOf(rows, "t2", 1));
});

test("episodes whose requests keep failing are lost (no row), counted by reason, and filled by the next run", async () => {
  const out = join(scratchDir(), "rows.jsonl");
  let broken = true;
  const flaky: Policy = {
    name: "flaky",
    complete: async (m, o) => {
      if (broken && (m[1].content ?? "").includes("t3")) {
        o.onRetry?.("http_503", 1);
        throw new PolicyError("http_503", "still down", { retryable: true });
      }
      return policy.complete(m, o);
    },
  };
  const r = await runRollout(tasks, flaky, env, opts(out));
  assert.equal(r.rows.length, 4);
  assert.deepEqual(r.progress.lost_by, { http_503: 2 });
  assert.deepEqual(r.progress.rerolled_by, { http_503: 2 });
  assert.match(r.lostExamples.http_503, /^t3: still down/);
  broken = false;
  const again = await runRollout(tasks, flaky, env, opts(out));
  assert.equal(again.rows.length, 6);
  assert.equal(again.progress.lost, 0);
});

test("a fatal policy error stops the run with a clear error; rows already written stay", async () => {
  const out = join(scratchDir(), "rows.jsonl");
  const bad: Policy = { name: "bad", complete: async () => { throw new PolicyError("auth", "key refused", { fatal: true }); } };
  await assert.rejects(runRollout(tasks, bad, env, opts(out)), (e: Error & { code?: string }) => e.code === "policy_auth" && /key refused/.test(e.message));
});

test("an episode refused for the setup writes a setup-error row that no statistic counts; a later run replaces it", async () => {
  const out = join(scratchDir(), "rows.jsonl");
  const refusing: Policy = {
    ...policy,
    complete: async (m, o) => {
      if (m.some((x) => x.content === "question t1")) throw new PolicyError("context_exceeded", "the prompt has 3000 tokens", { setup: true });
      return policy.complete(m, o);
    },
  };
  const r = await runRollout(tasks, refusing, env, opts(out));
  assert.equal(r.rows.length, 4);
  assert.ok(r.rows.every((x) => x.task_id !== "t1"));
  assert.deepEqual(r.progress.refused_by, { context_exceeded: 2 });
  assert.equal(r.progress.lost, 0);
  assert.match(r.refusedExamples.context_exceeded, /^t1: the prompt has 3000 tokens/);
  const refused = rowsOf(out).filter((x) => x.task_id === "t1");
  assert.equal(refused.length, 2);
  assert.ok(refused.every((x) => x.outcome === "setup_error" && x.setup_error === "context_exceeded" && x.reason === "the prompt has 3000 tokens" && x.graded_turn === 0));
  const file = readStatRows(out);
  assert.equal(file.rows.length, 4);
  assert.deepEqual(file.setupErrors, { count: 2, by: { context_exceeded: 2 } });
  const s = summarize(rowsOf(out));
  assert.equal(s.n_tasks, 2);
  assert.equal(s.setup_errors_left_out, 2);
  // the same run with the setup fixed runs exactly the refused samples again
  const again = await runRollout(tasks, policy, env, opts(out));
  assert.equal(again.progress.resumed, 4);
  assert.equal(again.rows.length, 6);
  const after = readStatRows(out);
  assert.equal(after.rows.length, 6);
  assert.equal(after.duplicates.count, 0);
  assert.equal(after.setupErrors.count, 2);
});

test("a run whose every episode is refused for one reason stops with that reason, not a score", async () => {
  const out = join(scratchDir(), "rows.jsonl");
  const refusing: Policy = { name: "x", complete: async () => { throw new PolicyError("context_exceeded", "the prompt has 3000 tokens", { setup: true }); } };
  await assert.rejects(runRollout(tasks, refusing, env, opts(out)), (e: Error & { code?: string }) => e.code === "policy_context_exceeded" && /every episode of this run \(6\) was refused.*3000 tokens/.test(e.message));
  assert.equal(rowsOf(out).length, 6);
});

test("gold failures are lost as gold_failed, not scored against the model", async () => {
  const out = join(scratchDir(), "rows.jsonl");
  const { T2sError } = await import("../../lib/core/errors.js");
  const goldFails: RolloutEnv = { ...env, grade: async (t, r, f) => { if (t.id === "t1") throw new T2sError("gold_failed", "gold errors"); return env.grade(t, r, f); } };
  const r = await runRollout(tasks, policy, goldFails, opts(out));
  assert.equal(r.rows.length, 4);
  assert.deepEqual(r.progress.lost_by, { gold_failed: 2 });
});
