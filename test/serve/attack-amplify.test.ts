// Amplification (issue 46, item 8): one small request may not become an unbounded number of sequences
// (prompts and prompts x n are capped, each cap a 400 naming its flag), and the engine's line stays cheap
// at any length: 65,536 rows of one request join it, and a client that leaves with them queued is
// cancelled, each over several turns of the event loop, with /health answered in between (seen by a
// poller, by ordering, never by latency).
import { test } from "node:test";
import assert from "node:assert/strict";
import { setImmediate as turn } from "node:timers/promises";
import { startServer } from "../../lib/serve/server.js";
import { REQUEST_LIMITS } from "../../lib/serve/limits.js";
import { WaitQueue } from "../../lib/model/engine/wait-queue.js";
import { fixtureDir } from "../model/fixtures.js";
import { HealthPoller, postJson } from "./attack-helpers.js";

/** The model folder each server loads in its engine thread (the /health figures are the worker path's). */
const LOAD = { dir: fixtureDir("qwen2"), backend: "cpu", name: "tiny", contextLength: 512 };

async function errorOf(res: Response): Promise<{ message: string; param: string | null }> {
  return ((await res.json()) as { error: { message: string; param: string | null } }).error;
}

test("8. prompts per request and prompts x n are capped: each is a 400 naming its flag", async () => {
  const server = await startServer({ load: LOAD, port: 0 });
  let failures: string[] = [];
  const poller = new HealthPoller(server.url);
  try {
    const many = await postJson(`${server.url}/v1/completions`, { model: "tiny", prompt: Array.from({ length: REQUEST_LIMITS.maxPrompts + 1 }, (_, i) => `p${i}`), max_tokens: 1 });
    assert.equal(many.status, 400);
    const e1 = await errorOf(many);
    assert.equal(e1.param, "prompt");
    assert.match(e1.message, /at most 1024 per request/);
    assert.match(e1.message, /--max-completion-prompts/);
    // 100 prompts x n 64 = 6,400 sequences from a 1 KB body
    const rows = await postJson(`${server.url}/v1/completions`, { model: "tiny", prompt: Array.from({ length: 100 }, (_, i) => [1 + (i % 200)]), n: 64, max_tokens: 1 });
    assert.equal(rows.status, 400);
    const e2 = await errorOf(rows);
    assert.equal(e2.param, "n");
    assert.match(e2.message, /6400 sequences \(100 prompts x n 64\)/);
    assert.match(e2.message, /--max-request-sequences/);
    // at the caps, a request is served
    const ok = await postJson(`${server.url}/v1/completions`, { model: "tiny", prompt: Array.from({ length: 64 }, (_, i) => [1 + i]), n: 64, max_tokens: 1 });
    assert.equal(ok.status, 200);
    assert.equal(((await ok.json()) as { choices: unknown[] }).choices.length, 4096);
  } finally {
    failures = await poller.stop();
    await server.close();
  }
  assert.deepEqual(failures, [], "/health failed while attacked");
  // the chat route counts its n against the same cap, which a server may lower
  const small = await startServer({ load: LOAD, port: 0, requestLimits: { maxSequences: 8 } });
  try {
    const res = await postJson(`${small.url}/v1/chat/completions`, { model: "tiny", messages: [{ role: "user", content: "hi" }], n: 16, max_tokens: 1 });
    assert.equal(res.status, 400);
    assert.equal((await errorOf(res)).param, "n");
  } finally {
    await small.close();
  }
});

test("8. 65,536 rows join the line in chunks, and a client that leaves with them queued is cancelled in chunks: /health answers in the middle of both", async () => {
  const rows = 1024 * 64;
  const server = await startServer({ load: LOAD, port: 0, maxBatch: 4, requestLimits: { maxSequences: rows } });
  let failures: string[] = [];
  const poller = new HealthPoller(server.url);
  const waitingSeen: { sent: number; waiting: number }[] = [];
  const health = async () => ((await (await fetch(`${server.url}/health`)).json()) as { waiting: number; running: number });
  try {
    const client = new AbortController();
    const res = fetch(`${server.url}/v1/completions`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ model: "tiny", prompt: Array.from({ length: 1024 }, (_, i) => [1 + (i % 300)]), n: 64, max_tokens: 400, seed: 2 }), signal: client.signal }).catch(() => null);
    // wait until (nearly) all its rows are queued
    let full = 0;
    // the rows join the line over many turns of the event loop, with /health answered in between
    const joining: number[] = [];
    while ((full = (await health()).waiting) < rows - 64) (joining.push(full), await turn());
    assert.ok(joining.some((w) => w > 0), `no /health answer while the rows were joining the line: ${JSON.stringify(joining.slice(0, 8))}`);
    const left = performance.now();
    client.abort();
    await res;
    // /health, back to back, while the line drains
    for (;;) {
      const at = performance.now();
      const h = await health();
      waitingSeen.push({ sent: at, waiting: h.waiting });
      if (h.waiting === 0) break;
    }
    const midway = waitingSeen.filter((w) => w.waiting > 0 && w.waiting < full / 2);
    assert.ok(midway.length >= 1, `no /health answer while the rows were being cancelled: ${JSON.stringify(waitingSeen.slice(0, 8))}`);
    assert.ok(poller.within(left, performance.now()) >= 1);
  } finally {
    failures = await poller.stop();
    await server.close();
  }
  assert.deepEqual(failures, [], "/health failed while attacked");
});

test("the waiting line: first in, first out, and any member leaves in O(1) (200,000 rows, every other one taken out from the middle)", () => {
  const q = new WaitQueue<number>();
  const n = 200_000;
  for (let i = 0; i < n; i++) q.push(i);
  for (let i = 1; i < n; i += 2) assert.ok(q.delete(i));
  assert.equal(q.size, n / 2);
  assert.equal(q.shift(), 0);
  assert.equal(q.first(), 2);
  assert.equal(q.delete(1), false);
  const rest = q.drain();
  assert.equal(rest.length, n / 2 - 1);
  assert.deepEqual(rest.slice(0, 3), [2, 4, 6]);
  assert.equal(q.size, 0);
});
