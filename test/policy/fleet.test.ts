import { test } from "node:test";
import assert from "node:assert/strict";
import { EndpointPool } from "../../lib/policy/endpoints.js";
import { OpenAIPolicy, parseOpenAISpec } from "../../lib/policy/openai.js";
import { createPolicy } from "../../lib/policy/spec.js";
import { runRollout } from "../../lib/runs/rollout.js";
import type { Task } from "../../lib/tasks/types.js";
import { scratchDir } from "../helpers.js";
import { startFakeOpenAI } from "../support/fake-openai.js";
import { join } from "node:path";

const msgs = (q: string) => [{ role: "user" as const, content: q }];

test("a fleet spec lists several base URLs for one model", () => {
  const s = parseOpenAISpec("qwen@http://a:8000,http://b:8000/v1/ , https://c/x");
  assert.deepEqual(s.baseUrls, ["http://a:8000/v1", "http://b:8000/v1", "https://c/x"]);
  assert.equal(s.baseUrl, "http://a:8000/v1");
  assert.throws(() => parseOpenAISpec("q@http://a:1,,http://b:1"), /empty URL/);
  assert.throws(() => parseOpenAISpec("q@http://a:1,http://a:1/v1"), /listed twice/);
  assert.throws(() => parseOpenAISpec("q@http://a:1,nota url"), /not a URL/);
  const p = createPolicy("openai:qwen@http://a:8000,http://b:8000") as OpenAIPolicy;
  assert.deepEqual(p.endpoints.urls, ["http://a:8000/v1", "http://b:8000/v1"]);
  assert.equal(p.name, "openai:qwen@http://a:8000/v1,http://b:8000/v1");
});

test("the pool picks the endpoint with the fewest outstanding requests, then the least used", async () => {
  const pool = new EndpointPool(["a", "b", "c"]);
  let releaseA: () => void = () => {};
  const busyA = pool.use("a", () => new Promise<void>((r) => (releaseA = r)));
  assert.equal(pool.pick(), "b");
  await pool.use("b", async () => undefined);
  assert.equal(pool.pick(), "c");
  assert.equal(pool.pick(new Set(["c"])), "b");
  assert.equal(pool.pick(new Set(["a", "b", "c"])), "c", "all tried: back to the whole fleet");
  releaseA();
  await busyA;
  assert.deepEqual(pool.inFlight(), { a: 0, b: 0, c: 0 });
});

test("requests spread over a fleet by outstanding load, and a failing endpoint's requests are answered elsewhere", async () => {
  const slow = await startFakeOpenAI(() => ({ content: "slow", delay_ms: 120 }));
  const fast = await startFakeOpenAI(() => ({ content: "fast", delay_ms: 5 }));
  const down = await startFakeOpenAI(() => ({ status: 503 }));
  const p = new OpenAIPolicy("m", [slow.baseUrl, fast.baseUrl, down.baseUrl], { concurrency: 4, backoffMs: 1 });
  try {
    const retries: string[] = [];
    const out = await Promise.all(Array.from({ length: 24 }, (_, i) => p.complete(msgs(`q${i}`), { onRetry: (r) => retries.push(r) })));
    const by = (u: string) => out.filter((c) => c[0].endpoint === u).length;
    assert.equal(by(down.baseUrl), 0, "the 503 endpoint never answers");
    assert.ok(by(fast.baseUrl) > by(slow.baseUrl), `the fast endpoint takes more (${by(fast.baseUrl)} vs ${by(slow.baseUrl)})`);
    assert.ok(by(slow.baseUrl) > 0, "the slow endpoint still takes some");
    for (const c of out) assert.equal(c[0].text, c[0].endpoint === fast.baseUrl ? "fast" : "slow");
    assert.ok(down.requests.length > 0 && retries.every((r) => r === "http_503"));
  } finally {
    await p.close();
    await Promise.all([slow.close(), fast.close(), down.close()]);
  }
});

test("rows of a rollout on a fleet record the endpoint that answered", async () => {
  const a = await startFakeOpenAI(() => ({ content: "```sql\nSELECT 1\n```", delay_ms: 10 }));
  const b = await startFakeOpenAI(() => ({ content: "```sql\nSELECT 1\n```", delay_ms: 10 }));
  const p = new OpenAIPolicy("m", [a.baseUrl, b.baseUrl], { concurrency: 4 });
  const tasks: Task[] = Array.from({ length: 6 }, (_, i) => ({ id: `t${i}`, db_id: "x", db_path: "/x.sqlite", question: `q${i}`, gold_sql: "SELECT 1", difficulty: "easy", archetype: "a", style: "s", split: "train", source: "test" }));
  const env = {
    opening: (t: Task) => msgs(t.question),
    runTool: async () => ({ ok: true as const, columns: ["n"], rows: [[1]], elapsedMs: 0, truncated: false }),
    grade: async () => ({ correct: true, executes: true, outcome: "correct" as const, reason: "match", reward: 1, sql: "SELECT 1" }),
  };
  try {
    const r = await runRollout(tasks, p, env, { out: join(scratchDir("t2s-fleet-"), "rows.jsonl"), k: 2, episode: { style: "single" }, promptHash: "h", concurrency: 4 });
    assert.equal(r.rows.length, 12);
    const endpoints = new Set(r.rows.map((row) => row.endpoint));
    assert.deepEqual([...endpoints].sort(), [a.baseUrl, b.baseUrl].sort());
  } finally {
    await p.close();
    await Promise.all([a.close(), b.close()]);
  }
});
