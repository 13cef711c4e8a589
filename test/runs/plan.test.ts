import { test } from "node:test";
import assert from "node:assert/strict";
import { planEpisodes, sampleSeed } from "../../lib/runs/plan.js";
import { metaDifferences, tasksHash, type RunMeta } from "../../lib/runs/meta.js";
import { Progress, progressLine } from "../../lib/runs/progress.js";
import type { Task } from "../../lib/tasks/types.js";

const task = (id: string) => ({ id, db_id: "d", db_path: "/x", question: `q ${id}`, gold_sql: "SELECT 1", difficulty: "easy", archetype: "a", style: "s", split: "holdout", source: "t" }) as Task;

test("planning tops up each task to k, filling exactly the missing sample indices", () => {
  const have = new Set(["1|a|0", "1|a|2", "1|b|0", "1|b|1", "1|b|2", "2|c|1"]);
  const { todo, done } = planEpisodes([task("a"), task("b"), task("c")], 3, "1", 7, (e, t, s) => have.has(`${e}|${t}|${s}`));
  assert.equal(done, 5);
  assert.deepEqual(todo.map((p) => `${p.task.id}${p.sample}`), ["c0", "a1", "c1", "c2"]);
  assert.equal(todo[0].seed, sampleSeed(7, "1", "c", 0));
});

test("sample seeds depend only on (seed, eval run, task, sample)", () => {
  assert.equal(sampleSeed(1, "1", "a", 0), sampleSeed(1, "1", "a", 0));
  const all = new Set([sampleSeed(1, "1", "a", 0), sampleSeed(2, "1", "a", 0), sampleSeed(1, "2", "a", 0), sampleSeed(1, "1", "b", 0), sampleSeed(1, "1", "a", 1)]);
  assert.equal(all.size, 5);
  assert.ok(sampleSeed(1, "1", "a", 0) < 2 ** 31);
});

test("metadata differences name each changed field; the tasks hash ignores order", () => {
  const base: RunMeta = {
    run_id: "r", created_at: "t", kit_version: "0.1.0", policy: "openai:m@u", model: "m", adapter: null, style: "single", protocol: null,
    sampling: { temperature: 0.7, top_p: null, max_tokens: 512, seed: 0 }, max_tool_calls: null, max_context_tokens: null, tool_output: null,
    prompt_hash: "p", tasks_hash: "h", tasks_file: null, k: 4,
  };
  assert.deepEqual(metaDifferences(base, { ...base, k: 8, run_id: "other", created_at: "u" }), []);
  assert.deepEqual(metaDifferences(base, { ...base, sampling: { ...base.sampling, temperature: 1 }, prompt_hash: "q" }), ["temperature: 0.7 -> 1", 'prompt_hash: "p" -> "q"']);
  assert.equal(tasksHash([task("a"), task("b")]), tasksHash([task("b"), task("a")]));
  assert.notEqual(tasksHash([task("a")]), tasksHash([task("a"), task("b")]));
});

test("progress counts landed, resumed, re-rolls and losses; the line and the callback agree", () => {
  let t = 0;
  const seen: number[] = [];
  const out: string[] = [];
  const p = new Progress({ total: 10, resumed: 4, now: () => t, intervalMs: 0, onProgress: (s) => seen.push(s.landed), stream: { write: (s: string) => (out.push(s), true) } as never });
  t = 1000;
  p.landed();
  p.rerolled("http_500");
  p.rerolled("http_500");
  p.lost("timeout");
  t = 2000;
  p.landed();
  const snap = p.finish();
  assert.equal(snap.landed, 6);
  assert.equal(snap.rerolled, 2);
  assert.deepEqual(snap.lost_by, { timeout: 1 });
  assert.equal(snap.rate_per_s, 1);
  assert.equal(snap.done, true);
  assert.deepEqual(seen, [5, 5, 5, 5, 6, 6]);
  assert.equal(progressLine(snap), "rows 6/10 (4 resumed) 1.00/s ETA 0s | re-rolled 2 (http_500 2) | lost 1 (timeout 1)");
  assert.equal(out.at(-1), progressLine(snap) + "\n");
});

test("progress is throttled: updates closer than the interval are not emitted", () => {
  let t = 0;
  let calls = 0;
  const p = new Progress({ total: 100, resumed: 0, now: () => t, intervalMs: 1000, onProgress: () => calls++ });
  for (let i = 0; i < 50; i++) {
    t += 10;
    p.landed();
  }
  assert.equal(calls, 1);
  p.finish();
  assert.equal(calls, 2);
});

test("on a terminal the progress line is rewritten in place and ended with a newline", () => {
  let t = 0;
  const out: string[] = [];
  const p = new Progress({ total: 2, resumed: 0, now: () => t, stream: { isTTY: true, write: (s: string) => (out.push(s), true) } as never });
  t = 500;
  p.landed();
  t = 1000;
  p.landed();
  p.finish();
  assert.ok(out.slice(0, -1).every((s) => s.startsWith("\r\x1b[2Krows ")));
  assert.equal(out.at(-2), "\r\x1b[2Krows 2/2 2.00/s ETA 0s");
  assert.equal(out.at(-1), "\n");
});
