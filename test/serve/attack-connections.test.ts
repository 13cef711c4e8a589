// Connections under attack (issue 46, item 8b), on both servers: sockets that send their headers and then
// trickle (or stop sending) their body hold no slot for long. Past the connection cap they are evicted
// before a new client is refused, and a body that does not arrive within the request timeout is cut; a
// streamed response, whose request was complete, is never cut. A /health poller runs throughout.
import { test } from "node:test";
import assert from "node:assert/strict";
import { connect, type Socket } from "node:net";
import { setImmediate as turn } from "node:timers/promises";
import { startServer } from "../../lib/serve/server.js";
import { ExecutorPool } from "../../lib/db/pool.js";
import { EnvService } from "../../lib/envserve/service.js";
import { startEnvServer } from "../../lib/envserve/server.js";
import { loadTasks } from "../../lib/tasks/loaders.js";
import { kitPath } from "../../lib/core/paths.js";
import { fixtureDir } from "../model/fixtures.js";
import { HealthPoller, postJson } from "./attack-helpers.js";

/** The model folder each server loads in its engine thread (the /health figures are the worker path's). */
const LOAD = { dir: fixtureDir("qwen2"), backend: "cpu", name: "tiny", contextLength: 512 };

interface SlowBody {
  socket: Socket;
  closed: Promise<void>;
}

/** A socket that sends complete headers for a 1,000-byte body, then one byte of it, then nothing. */
async function slowBody(url: string, path: string): Promise<SlowBody> {
  const { port } = new URL(url);
  const socket = connect(Number(port), "127.0.0.1");
  socket.on("error", () => {});
  const closed = new Promise<void>((resolve) => socket.once("close", () => resolve()));
  await new Promise<void>((resolve) => socket.once("connect", () => resolve()));
  socket.write(`POST ${path} HTTP/1.1\r\nhost: 127.0.0.1:${port}\r\ncontent-type: application/json\r\ncontent-length: 1000\r\n\r\n{`);
  return { socket, closed };
}

/** Resolves once at least `n` of the sockets have been closed (by the server). */
function untilClosed(held: SlowBody[], n: number): Promise<void> {
  let count = 0;
  return new Promise((resolve) => {
    if (n <= 0) return resolve();
    for (const h of held) void h.closed.then(() => ++count === n && resolve());
  });
}

test("8b. t2s serve: hundreds of sockets trickling their bodies are evicted past the cap; /health and a real request are answered", async () => {
  const server = await startServer({ load: LOAD, port: 0, connections: { maxConnections: 32 } });
  const held: SlowBody[] = [];
  let poller: HealthPoller | null = null;
  let failures: string[] = [];
  try {
    for (let b = 0; b < 6; b++) held.push(...(await Promise.all(Array.from({ length: 50 }, () => slowBody(server.url, "/v1/chat/completions")))));
    const start = performance.now();
    poller = new HealthPoller(server.url);
    const res = await postJson(`${server.url}/v1/chat/completions`, { model: "tiny", messages: [{ role: "user", content: "hi" }], max_tokens: 4 });
    assert.equal(res.status, 200);
    await poller.waitForAnswers(start, 3);
    assert.ok(poller.within(start, performance.now()) >= 3);
    // the oldest trickling sockets were closed to make room; at most the cap is open
    await untilClosed(held, 300 - 32);
    assert.ok(server.connections.evicted() >= 300 - 32, `${server.connections.evicted()} evicted`);
    assert.ok(server.connections.open() <= 32);
  } finally {
    failures = poller ? await poller.stop() : [];
    for (const h of held) h.socket.destroy();
    await server.close();
  }
  assert.deepEqual(failures, [], "/health failed while attacked");
});

test("8b. past the cap the socket doing no work for the longest is closed: a trickling body before a keep-alive client that was just answered", async () => {
  const server = await startServer({ load: LOAD, port: 0, connections: { maxConnections: 4 } });
  const { port } = new URL(server.url);
  const held: SlowBody[] = [];
  const extra: Socket[] = [];
  try {
    for (let i = 0; i < 3; i++) held.push(await slowBody(server.url, "/v1/chat/completions"));
    // a client that finished a request on its socket and keeps it for the next: idle, but newer than the bodies
    const keepAlive = connect(Number(port), "127.0.0.1");
    extra.push(keepAlive);
    keepAlive.on("error", () => {});
    const keepAliveClosed = new Promise<"keep-alive">((resolve) => keepAlive.once("close", () => resolve("keep-alive")));
    await new Promise<void>((resolve) => keepAlive.once("connect", () => resolve()));
    let answer = "";
    const answered = new Promise<void>((resolve) => keepAlive.on("data", (d) => /\r\n\r\n\{.*\}$/s.test((answer += d)) && resolve()));
    keepAlive.write(`GET /health HTTP/1.1\r\nhost: 127.0.0.1:${port}\r\n\r\n`);
    await answered;
    assert.match(answer, /^HTTP\/1.1 200/);
    // a fifth connection: one of the four must go, and it is the body that started first
    const fifth = connect(Number(port), "127.0.0.1");
    fifth.on("error", () => {});
    extra.push(fifth);
    const first = await Promise.race([held[0].closed.then(() => "oldest body" as const), keepAliveClosed]);
    assert.equal(first, "oldest body");
    assert.equal(server.connections.evicted(), 1);
  } finally {
    for (const h of held) h.socket.destroy();
    for (const x of extra) x.destroy();
    await server.close();
  }
});

test("8b. a body that does not arrive within --request-timeout is cut; a stream open past it is not", { timeout: 600_000 }, async () => {
  // the mechanism under test is the timeout itself: an explicit, short limit. The stream is queued behind
  // 4,096 rows of 400 tokens on 4 slots (hours of work), so it is still open when the slow body is cut,
  // however loaded the machine; the rows' client then leaves, and the stream runs to its end.
  const server = await startServer({ load: LOAD, port: 0, maxBatch: 4, connections: { requestMs: 300 } });
  const poller = new HealthPoller(server.url);
  const blocker = new AbortController();
  let failures: string[] = [];
  try {
    const blocked = fetch(`${server.url}/v1/completions`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ model: "tiny", prompt: Array.from({ length: 64 }, (_, i) => [1 + i]), n: 64, max_tokens: 400, ignore_eos: true }), signal: blocker.signal }).catch(() => null);
    while (((await (await fetch(`${server.url}/health`)).json()) as { waiting: number }).waiting < 4000) await turn();
    const res = await postJson(`${server.url}/v1/chat/completions`, { model: "tiny", messages: [{ role: "user", content: "hi" }], max_tokens: 8, ignore_eos: true, stream: true, seed: 3 });
    assert.equal(res.status, 200);
    const reader = res.body!.getReader();
    const decoder = new TextDecoder();
    // its first chunk (the role) is out; its tokens wait for a slot
    let text = decoder.decode((await reader.read()).value);
    // a socket that stops sending its body is closed by the server, while the stream stays open
    const slow = await slowBody(server.url, "/v1/completions");
    await slow.closed;
    assert.ok(server.connections.timedOut() >= 1);
    blocker.abort();
    await blocked;
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      text += decoder.decode(value);
    }
    assert.match(text, /"content":"[^"]+"/, "the stream's tokens, all sent after the cut");
    assert.match(text, /data: \[DONE\]\n\n$/);
    assert.doesNotMatch(text, /"error"/);
  } finally {
    blocker.abort();
    failures = await poller.stop();
    await server.close();
  }
  assert.deepEqual(failures, [], "/health failed while attacked");
});

test("8b. env serve caps open sockets, busy ones included: trickling bodies past the cap are evicted, /health answers", async () => {
  const pool = new ExecutorPool({ workers: 1, startOnDemand: true });
  const service = new EnvService({ executor: pool, tasks: loadTasks(kitPath("data", "shop", "tasks.jsonl")).slice(0, 2) });
  const server = await startEnvServer({ service, port: 0, connections: { maxConnections: 32 } });
  const held: SlowBody[] = [];
  let poller: HealthPoller | null = null;
  let failures: string[] = [];
  try {
    for (let b = 0; b < 6; b++) held.push(...(await Promise.all(Array.from({ length: 50 }, () => slowBody(server.url, "/v1/grade")))));
    const start = performance.now();
    poller = new HealthPoller(server.url);
    const tasks = await fetch(`${server.url}/v1/tasks`);
    assert.equal(tasks.status, 200);
    await poller.waitForAnswers(start, 3);
    // every socket past the cap was closed by the server
    await untilClosed(held, 300 - 32);
    assert.ok(server.connections.open() <= 32);
  } finally {
    failures = poller ? await poller.stop() : [];
    for (const h of held) h.socket.destroy();
    await server.close();
    await pool.close();
  }
  assert.deepEqual(failures, [], "/health failed while attacked");
});
