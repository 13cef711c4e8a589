// t2s serve's engine thread, its life: /health and /metrics answer while the engine thread is held in the
// middle of a generation (they read its last snapshot, never wait for a step); a busy HTTP thread holds the
// engine thread back instead of queueing its tokens; an engine thread that dies fails the requests in flight
// and later ones with engine_failed and /health says so, never a hang; and a server that stops drains, then a
// second close cuts what runs at once.
import { test } from "node:test";
import assert from "node:assert/strict";
import { setTimeout as sleep } from "node:timers/promises";
import { startServer, type RunningServer } from "../../lib/serve/server.js";
import { EVENT_WINDOW } from "../../lib/serve/engine-thread/protocol.js";
import { fixtureDir } from "../model/fixtures.js";
import { HANG_GUARD_MS } from "../helpers.js";
import { postJson } from "./attack-helpers.js";

const LOAD = { dir: fixtureDir("qwen2"), backend: "cpu", name: "tiny", contextLength: 2048 };
const HANG_GUARD = { timeout: HANG_GUARD_MS };

/** A streaming chat request of `tokens` new tokens; resolves once its first content chunk came. */
async function longStream(server: RunningServer, tokens: number): Promise<{ rest: Promise<string>; abort: () => void }> {
  const client = new AbortController();
  const res = await fetch(`${server.url}/v1/chat/completions`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ model: "tiny", messages: [{ role: "user", content: "go on" }], max_tokens: tokens, ignore_eos: true, stream: true }), signal: client.signal });
  assert.equal(res.status, 200);
  const reader = res.body!.getReader();
  const decoder = new TextDecoder();
  let text = "";
  while (!text.includes('"content":"') || !/"content":"[^"]/.test(text)) {
    const { value, done } = await reader.read();
    if (done) break;
    text += decoder.decode(value, { stream: true });
  }
  const rest = (async () => {
    for (;;) {
      const { value, done } = await reader.read();
      if (done) return text;
      text += decoder.decode(value, { stream: true });
    }
  })();
  return { rest, abort: () => client.abort() };
}

const health = async (server: RunningServer) => {
  const res = await fetch(`${server.url}/health`);
  return { status: res.status, body: (await res.json()) as { status: string; running: number; error?: string } };
};

test("/health and /metrics answer while the engine thread is held mid-generation; the stream goes on after", HANG_GUARD, async () => {
  const server = await startServer({ load: LOAD, port: 0 });
  try {
    const stream = await longStream(server, 64);
    const release = await server.host.thread!.hold();
    try {
      // were /health to wait for the engine, these would never answer (the hang guard would end the test)
      for (let i = 0; i < 3; i++) {
        const h = await health(server);
        assert.equal(h.status, 200);
        assert.equal(h.body.running, 1);
      }
      assert.match(await (await fetch(`${server.url}/metrics`)).text(), /vllm:num_requests_running\{[^}]*\} 1/);
    } finally {
      release();
    }
    const text = await stream.rest;
    assert.match(text, /"finish_reason":"length"/);
    assert.match(text, /data: \[DONE\]/);
  } finally {
    await server.close();
  }
});

test("a busy HTTP thread holds the engine thread back: at most EVENT_WINDOW batches of events wait between them", HANG_GUARD, async () => {
  const server = await startServer({ load: LOAD, port: 0 });
  try {
    const thread = server.host.thread!;
    const stream = await longStream(server, 1500);
    // this thread is busy (never yields): the engine thread goes on until the window is full, then waits
    const start = performance.now();
    let b = thread.backlog();
    while (b.sent - b.acked < EVENT_WINDOW && performance.now() - start < HANG_GUARD_MS / 2) b = thread.backlog();
    assert.equal(b.sent - b.acked, EVENT_WINDOW);
    const until = performance.now() + 500;
    while (performance.now() < until) b = thread.backlog();
    assert.equal(b.sent - b.acked, EVENT_WINDOW, "the engine thread sent past its window while this thread was busy");
    stream.abort();
    await stream.rest.catch(() => null);
  } finally {
    await server.close();
  }
});

test("a full window of event batches is handled one batch per turn of the event loop: sockets are served in between", HANG_GUARD, async () => {
  const server = await startServer({ load: LOAD, port: 0 });
  try {
    const thread = server.host.thread!;
    // counts the event batches this thread handles (onMessage is where one batch's rows are written out)
    let handled = 0;
    let onBatch: (() => void) | null = null;
    const spy = thread as unknown as { onMessage: (m: { t: string }) => void };
    const onMessage = spy.onMessage.bind(thread);
    spy.onMessage = (m) => {
      if (m.t === "events") {
        handled++;
        onBatch?.();
        onBatch = null;
      }
      onMessage(m);
    };
    const stream = await longStream(server, 1500);
    const start = performance.now();
    let b = thread.backlog();
    while (b.sent - b.acked < EVENT_WINDOW && performance.now() - start < HANG_GUARD_MS / 2) b = thread.backlog();
    assert.equal(b.sent - b.acked, EVENT_WINDOW);
    // the window's batches arrive together once this thread yields; a callback queued when the first of
    // them is handled runs at the end of that turn: it must find one batch handled, not all of them
    const seen = await new Promise<number>((r) => {
      onBatch = () => {
        const first = handled;
        setImmediate(() => r(handled - first + 1));
      };
    });
    assert.equal(seen, 1, `${seen} event batches were handled in one turn`);
    stream.abort();
    await stream.rest.catch(() => null);
  } finally {
    await server.close();
  }
});

test("an engine thread that dies fails the stream in flight and later requests with engine_failed; /health says so", HANG_GUARD, async () => {
  const server = await startServer({ load: LOAD, port: 0 });
  try {
    const stream = await longStream(server, 1500);
    await server.host.thread!.kill();
    const text = await stream.rest;
    assert.match(text, /"code":"engine_failed"/);
    assert.match(text, /data: \[DONE\]/);
    const h = await health(server);
    assert.equal(h.status, 503);
    assert.equal(h.body.status, "engine_failed");
    assert.match(h.body.error!, /the engine thread stopped/);
    const later = await postJson(`${server.url}/v1/completions`, { model: "tiny", prompt: "SELECT", max_tokens: 4 });
    assert.equal(later.status, 503);
    assert.equal(((await later.json()) as { error: { code: string } }).error.code, "engine_failed");
  } finally {
    await server.close();
  }
});

test("shutdown: close() lets a request in flight finish and refuses new ones; a second close(0) cuts a long one at once", HANG_GUARD, async () => {
  const server = await startServer({ load: LOAD, port: 0 });
  const short = await longStream(server, 40);
  const closing = server.close(HANG_GUARD_MS);
  const refused = await postJson(`${server.url}/v1/completions`, { model: "tiny", prompt: "SELECT", max_tokens: 4 }).catch(() => null);
  if (refused) assert.equal(refused.status, 503);
  const done = await short.rest;
  assert.match(done, /"finish_reason":"length"/);
  await closing;

  const second = await startServer({ load: LOAD, port: 0 });
  const long = await longStream(second, 1900);
  const drained = second.close(HANG_GUARD_MS);
  await sleep(200);
  void second.close(0);
  const cut = await long.rest;
  assert.doesNotMatch(cut, /"finish_reason":"length"/);
  assert.match(cut, /"error"/);
  assert.match(cut, /data: \[DONE\]/);
  await drained;
});
