// t2s serve's engine thread: a server started from a model folder runs its weights and engines in a worker
// thread, and answers every route as the in-process engine does: the same greedy and seeded tokens for chat,
// completions, streaming and n > 1, guided decoding (the grammar stays in the HTTP thread), echo logprobs,
// runtime adapters (file checks here, the merge there, errors with the same status and code), /metrics
// counted from the engine thread's snapshots, and a client that leaves cancels its rows there.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { copyFileSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { setImmediate as turn } from "node:timers/promises";
import { loadModel } from "../../lib/model/load.js";
import type { CausalLM } from "../../lib/model/model.js";
import { startServer, type RunningServer } from "../../lib/serve/server.js";
import { fixtureDir } from "../model/fixtures.js";
import { postJson, validates } from "./attack-helpers.js";
import { scratchDir } from "../helpers.js";

const LOAD = { dir: fixtureDir("qwen2"), backend: "cpu", name: "tiny", contextLength: 2048 };
const SCHEMA = { type: "object", properties: { key: { type: "string" }, ok: { type: "boolean" } }, required: ["key", "ok"], additionalProperties: false };

let model: CausalLM;
/** The engine in this thread (a model built here) and in the engine thread (a folder loaded there). */
let inThread: RunningServer;
let worker: RunningServer;

before(async () => {
  model = await loadModel(LOAD.dir, LOAD);
  inThread = await startServer({ model, port: 0, allowRuntimeLora: true });
  worker = await startServer({ load: LOAD, port: 0, allowRuntimeLora: true });
});

after(async () => {
  await worker?.close();
  await inThread?.close();
  model?.dispose();
});

async function json(server: RunningServer, path: string, body: unknown): Promise<{ status: number; body: any }> {
  const res = await postJson(`${server.url}${path}`, body);
  const text = await res.text();
  return { status: res.status, body: text.startsWith("{") ? JSON.parse(text) : text };
}

/** The content of every data event of an SSE response, and whether it ended with [DONE]. */
async function events(res: Response): Promise<{ chunks: any[]; done: boolean }> {
  const text = await res.text();
  const data = text.split("\n\n").filter((e) => e.startsWith("data: ")).map((e) => e.slice(6));
  return { chunks: data.filter((d) => d !== "[DONE]").map((d) => JSON.parse(d)), done: data.at(-1) === "[DONE]" };
}

test("the engine thread is where a folder's model runs; a model built here runs here", async () => {
  const h = (await (await fetch(`${worker.url}/health`)).json()) as { status: string; engine_thread: string; backend: string; models: string[] };
  assert.equal(h.status, "ok");
  assert.equal(h.engine_thread, "worker");
  assert.equal(h.backend, "cpu");
  assert.deepEqual(h.models, ["tiny"]);
  assert.equal(worker.host.mode, "worker");
  assert.ok(worker.host.thread);
  assert.equal(inThread.host.mode, "main");
  assert.equal(((await (await fetch(`${inThread.url}/health`)).json()) as { engine_thread: string }).engine_thread, "main");
});

test("chat and completions: greedy and seeded rows (n > 1) are the in-process engine's tokens", async () => {
  const chat = { model: "tiny", messages: [{ role: "system", content: "You write SQLite." }, { role: "user", content: "How many orders?" }], max_tokens: 12, ignore_eos: true };
  for (const body of [{ ...chat, temperature: 0 }, { ...chat, temperature: 0.9, seed: 3, n: 3, logprobs: true, top_logprobs: 2 }]) {
    const [a, b] = await Promise.all([json(inThread, "/v1/chat/completions", body), json(worker, "/v1/chat/completions", body)]);
    assert.equal(a.status, 200, JSON.stringify(a.body));
    assert.equal(b.status, 200, JSON.stringify(b.body));
    assert.deepEqual(b.body.choices, a.body.choices);
    assert.deepEqual(b.body.usage, a.body.usage);
  }
  const completion = { model: "tiny", prompt: ["SELECT", "How many"], max_tokens: 10, temperature: 0.7, seed: 9, n: 2, logprobs: 2, echo: true };
  const [a, b] = await Promise.all([json(inThread, "/v1/completions", completion), json(worker, "/v1/completions", completion)]);
  assert.equal(b.status, 200, JSON.stringify(b.body));
  assert.equal(b.body.choices.length, 4);
  // echo with logprobs scores the prompt with the weights, in the engine thread
  assert.deepEqual(b.body.choices, a.body.choices);
});

test("streaming: each step's text arrives as it is made and adds up to the plain reply", async () => {
  const body = { model: "tiny", messages: [{ role: "user", content: "List products" }], max_tokens: 16, temperature: 0, ignore_eos: true };
  const plain = await json(worker, "/v1/chat/completions", body);
  const res = await postJson(`${worker.url}/v1/chat/completions`, { ...body, stream: true, n: 2, stream_options: { include_usage: true } });
  assert.equal(res.status, 200);
  const { chunks, done } = await events(res);
  assert.ok(done);
  for (const i of [0, 1]) {
    const mine = chunks.filter((c) => c.choices[0]?.index === i);
    const text = mine.map((c) => c.choices[0].delta.content ?? "").join("");
    assert.equal(text, plain.body.choices[0].message.content);
    // token by token: more content chunks than one
    assert.ok(mine.filter((c) => c.choices[0].delta.content).length > 2);
    assert.equal(mine.at(-1).choices[0].finish_reason, "length");
  }
  assert.equal(chunks.at(-1).usage.completion_tokens, 32);
});

test("guided decoding: the grammar answers the engine thread's mask questions; the reply validates and equals the in-process one", async () => {
  const body = { model: "tiny", messages: [{ role: "user", content: "Look it up" }], response_format: { type: "json_schema", json_schema: { name: "lookup", schema: SCHEMA } }, max_tokens: 64, temperature: 1, seed: 12, n: 2 };
  const [a, b] = await Promise.all([json(inThread, "/v1/chat/completions", body), json(worker, "/v1/chat/completions", body)]);
  assert.equal(b.status, 200, JSON.stringify(b.body));
  for (const c of b.body.choices) {
    assert.equal(c.finish_reason, "stop", JSON.stringify(c));
    assert.ok(validates(JSON.parse(c.message.content), SCHEMA), c.message.content);
  }
  assert.deepEqual(b.body.choices, a.body.choices);
});

test("runtime adapters: loaded and merged in the engine thread, served by name, unloaded; a broken one is refused as in-process", async () => {
  const load = { lora_name: "sql", lora_path: fixtureDir("qwen2-lora") };
  for (const s of [inThread, worker]) assert.equal((await json(s, "/v1/load_lora_adapter", load)).status, 200);
  const body = { model: "sql", messages: [{ role: "user", content: "hello" }], max_tokens: 8, temperature: 1, seed: 5 };
  const [a, b] = await Promise.all([json(inThread, "/v1/chat/completions", body), json(worker, "/v1/chat/completions", body)]);
  assert.equal(b.status, 200, JSON.stringify(b.body));
  assert.deepEqual(b.body.choices, a.body.choices);
  const base = await json(worker, "/v1/chat/completions", { ...body, model: "tiny" });
  assert.notEqual(base.body.choices[0].message.content, b.body.choices[0].message.content);
  for (const s of [inThread, worker]) assert.equal((await json(s, "/v1/unload_lora_adapter", { lora_name: "sql" })).status, 200);
  assert.equal((await json(worker, "/v1/chat/completions", body)).status, 404);
  // an adapter folder whose weights are not safetensors: the load fails in the engine thread, with the same answer
  const broken = scratchDir("t2s-broken-lora-");
  try {
    copyFileSync(join(fixtureDir("qwen2-lora"), "adapter_config.json"), join(broken, "adapter_config.json"));
    writeFileSync(join(broken, "adapter_model.safetensors"), "not a safetensors file");
    const [x, y] = await Promise.all([json(inThread, "/v1/load_lora_adapter", { lora_name: "bad", lora_path: broken }), json(worker, "/v1/load_lora_adapter", { lora_name: "bad", lora_path: broken })]);
    assert.equal(y.status, 400, JSON.stringify(y.body));
    // the loader's error crossed with its message and code
    assert.deepEqual(y.body, x.body);
  } finally {
    rmSync(broken, { recursive: true, force: true });
  }
  const h = (await (await fetch(`${worker.url}/health`)).json()) as { models: string[] };
  assert.deepEqual(h.models, ["tiny"]);
});

test("/metrics counts the engine thread's tokens and steps as the engine does", async () => {
  const metric = async (name: string) => Number(new RegExp(`^${name}\\{[^}]*\\} (\\S+)$`, "m").exec(await (await fetch(`${worker.url}/metrics`)).text())?.[1]);
  const tokens0 = await metric("vllm:generation_tokens_total");
  const steps0 = await metric("t2s_engine_steps_total");
  const r = await json(worker, "/v1/completions", { model: "tiny", prompt: "SELECT", max_tokens: 7, ignore_eos: true, n: 3, temperature: 1, seed: 1 });
  assert.equal(r.status, 200);
  // the snapshot that came with the rows' results is already in
  assert.equal((await metric("vllm:generation_tokens_total")) - tokens0, 21);
  // the prefill makes the first token, each decode step one more
  assert.ok((await metric("t2s_engine_steps_total")) - steps0 >= 6);
  assert.equal(await metric("vllm:num_requests_running"), 0);
});

test("a client that leaves mid-stream cancels its rows in the engine thread", async () => {
  const client = new AbortController();
  const res = await fetch(`${worker.url}/v1/chat/completions`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ model: "tiny", messages: [{ role: "user", content: "go on" }], max_tokens: 1500, ignore_eos: true, stream: true, n: 2 }), signal: client.signal });
  const reader = res.body!.getReader();
  // the role chunk goes out before the rows are submitted: wait for generated text
  let seen = "";
  while (!/"content":"[^"]/.test(seen)) seen += new TextDecoder().decode((await reader.read()).value);
  client.abort();
  await reader.read().catch(() => null);
  for (;;) {
    const h = (await (await fetch(`${worker.url}/health`)).json()) as { running: number; waiting: number };
    if (h.running === 0 && h.waiting === 0) break;
    await turn();
  }
  const text = await (await fetch(`${worker.url}/metrics`)).text();
  assert.ok(Number(/^t2s_sequences_cancelled_total\{[^}]*\} (\S+)$/m.exec(text)?.[1]) >= 2, text);
});

test("a row whose signal fired before it was submitted is cancelled by the engine thread's engine, and counted there", async () => {
  const engine = await worker.engine.engine("tiny");
  const before = worker.engine.metrics().cancelled;
  await assert.rejects(engine.submit({ ids: [1, 2, 3], maxTokens: 4, signal: AbortSignal.abort() }), (e: { code?: string }) => e.code === "cancelled");
  // counted as the engine in one thread counts it, in the snapshot that follows
  while (worker.engine.metrics().cancelled === before) await turn();
  assert.equal(worker.engine.metrics().cancelled, before + 1);
});
