import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { Agent, get as httpGet } from "node:http";
import OpenAI from "openai";
import { loadModel } from "../../lib/model/load.js";
import type { CausalLM } from "../../lib/model/model.js";
import { startServer, type RunningServer } from "../../lib/serve/server.js";
import { createPolicy } from "../../lib/policy/spec.js";
import { fixtureDir } from "../model/fixtures.js";

let model: CausalLM;
let server: RunningServer;
let client: OpenAI;

before(async () => {
  model = await loadModel(fixtureDir("qwen2"), { backend: "cpu", name: "tiny", contextLength: 2048 });
  server = await startServer({ model, adapters: { sql: fixtureDir("qwen2-lora") }, port: 0 });
  client = new OpenAI({ baseURL: `${server.url}/v1`, apiKey: "none", maxRetries: 0 });
});

after(async () => {
  await server.close();
  model.dispose();
});

test("GET /health and /v1/models list the base and the adapter", async () => {
  const health = (await (await fetch(`${server.url}/health`)).json()) as { status: string; backend: string };
  assert.equal(health.status, "ok");
  assert.equal(health.backend, "cpu");
  const models = await client.models.list();
  assert.deepEqual(models.data.map((m) => m.id).sort(), ["sql", "tiny"]);
});

test("concurrent clients are answered, batched together, deterministic per seed; the adapter differs from the base", async () => {
  const ask = (modelName: string, seed: number, content: string) =>
    client.chat.completions.create({ model: modelName, messages: [{ role: "system", content: "You write SQLite." }, { role: "user", content }], max_tokens: 8, temperature: 0.8, seed });
  const before = await server.engine.metrics();
  const replies = await Promise.all([ask("tiny", 1, "How many orders?"), ask("tiny", 2, "List products"), ask("tiny", 1, "How many orders?"), ask("tiny", 3, "Count customers please")]);
  const after = await server.engine.metrics();
  const meanBatch = (after.batchRows - before.batchRows) / (after.steps - before.steps);
  assert.ok(meanBatch > 1, `4 concurrent requests were decoded ${meanBatch.toFixed(2)} rows per step`);
  for (const r of replies) {
    assert.equal(r.object, "chat.completion");
    assert.equal(r.model, "tiny");
    assert.ok(["stop", "length"].includes(r.choices[0].finish_reason));
    assert.ok(r.usage!.completion_tokens >= 1 && r.usage!.prompt_tokens > 10);
  }
  assert.equal(replies[0].choices[0].message.content, replies[2].choices[0].message.content);
  const sample = (m: string) => client.chat.completions.create({ model: m, messages: [{ role: "user", content: "hello" }], max_tokens: 8, temperature: 1, seed: 5 });
  const [base, tuned] = await Promise.all([sample("tiny"), sample("sql")]);
  assert.equal(tuned.model, "sql");
  assert.notEqual(base.choices[0].message.content, tuned.choices[0].message.content);
});

test("n samples, stop strings and streaming through the official client", async () => {
  const r = await client.chat.completions.create({ model: "tiny", messages: [{ role: "user", content: "hi" }], n: 3, max_tokens: 5, temperature: 1, seed: 7, logprobs: true });
  assert.equal(r.choices.length, 3);
  for (const c of r.choices) {
    const lps = c.logprobs!.content!;
    assert.ok(lps.length >= 1 && lps.every((l) => l.logprob <= 0 && typeof l.token === "string"));
  }
  assert.deepEqual(r.choices.map((c) => c.index), [0, 1, 2]);
  const full = await client.chat.completions.create({ model: "tiny", messages: [{ role: "user", content: "stream me" }], max_tokens: 10, temperature: 0 });
  const stream = await client.chat.completions.create({ model: "tiny", messages: [{ role: "user", content: "stream me" }], max_tokens: 10, temperature: 0, stream: true, stream_options: { include_usage: true } });
  let text = "";
  let finish: string | null = null;
  let usage = 0;
  for await (const chunk of stream) {
    if (chunk.usage) usage = chunk.usage.completion_tokens;
    for (const c of chunk.choices) {
      text += c.delta.content ?? "";
      if (c.finish_reason) finish = c.finish_reason;
    }
  }
  assert.equal(text, full.choices[0].message.content);
  assert.equal(finish, full.choices[0].finish_reason);
  assert.equal(usage, full.usage!.completion_tokens);
  const content = full.choices[0].message.content ?? "";
  if (content.length >= 4) {
    const cut = await client.chat.completions.create({ model: "tiny", messages: [{ role: "user", content: "stream me" }], max_tokens: 10, temperature: 0, stop: [content.slice(2, 4)] });
    assert.equal(cut.choices[0].finish_reason, "stop");
    assert.equal(cut.choices[0].message.content, content.slice(0, content.indexOf(content.slice(2, 4))));
  }
});

test("bad requests get 400 (404 for an unknown model) with an OpenAI-style error body", async () => {
  const post = async (body: unknown) => {
    const res = await fetch(`${server.url}/v1/chat/completions`, { method: "POST", headers: { "content-type": "application/json" }, body: typeof body === "string" ? body : JSON.stringify(body) });
    return { status: res.status, body: (await res.json()) as { error: { message: string; param: string | null; type: string } } };
  };
  const msgs = [{ role: "user", content: "x" }];
  for (const [body, param] of [
    ["{not json", "body"],
    [{ model: "tiny" }, "messages"],
    [{ model: "tiny", messages: msgs, temperature: 5 }, "temperature"],
    [{ model: "tiny", messages: msgs, n: 0 }, "n"],
    [{ model: "tiny", messages: [{ role: "robot", content: "x" }] }, "messages[0].role"],
    [{ model: "tiny", messages: msgs, tools: [{ type: "nope" }] }, "tools[0]"],
    [{ model: "tiny", messages: msgs, max_tokens: -1 }, "max_tokens"],
  ] as const) {
    const r = await post(body);
    assert.equal(r.status, 400, JSON.stringify(body));
    assert.equal(r.body.error.type, "invalid_request_error");
    assert.equal(r.body.error.param, param);
    assert.ok(r.body.error.message.length > 0);
  }
  const unknown = await post({ model: "nope", messages: msgs });
  assert.equal(unknown.status, 404);
  assert.match(unknown.body.error.message, /tiny/);
  await assert.rejects(client.chat.completions.create({ model: "nope", messages: [{ role: "user", content: "x" }] }), (e: unknown) => (e as { status?: number }).status === 404);
  const route = await fetch(`${server.url}/v2/other`);
  assert.equal(route.status, 404);
});

test("the kit's own openai: policy works against the server, tools included", async () => {
  const policy = createPolicy(`openai:tiny@${server.url}/v1`);
  const tools = [{ type: "function" as const, function: { name: "run_sql", description: "run a query", parameters: { type: "object", properties: { sql: { type: "string" } } } } }];
  const out = await policy.complete([{ role: "user", content: "How many orders?" }], { n: 2, max_tokens: 6, temperature: 0.5, seed: 1, tools });
  assert.equal(out.length, 2);
  for (const c of out) {
    assert.ok(["stop", "length", "tool_calls"].includes(c.finish_reason));
    assert.ok(c.tokens_out >= 1);
  }
  await policy.close?.();
});

test("an idle keep-alive connection outlives Node's 5 s default, so clients waiting between requests are not reset", async () => {
  const agent = new Agent({ keepAlive: true, maxSockets: 1 });
  const port = (): Promise<number> =>
    new Promise((resolve, reject) => {
      const req = httpGet(`${server.url.replace(/\/v1$/, "")}/health`, { agent }, (res) => {
        const local = res.socket.localPort ?? -1;
        res.resume();
        res.on("end", () => resolve(local));
      });
      req.on("error", reject);
    });
  try {
    const first = await port();
    await new Promise((r) => setTimeout(r, 7000));
    assert.equal(await port(), first, "the second request reused the first connection");
  } finally {
    agent.destroy();
  }
});
