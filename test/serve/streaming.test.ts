import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import OpenAI from "openai";
import { loadModel } from "../../lib/model/load.js";
import type { CausalLM } from "../../lib/model/model.js";
import { startServer, type RunningServer } from "../../lib/serve/server.js";
import { fixtureDir } from "../model/fixtures.js";
import { HANG_GUARD_MS } from "../helpers.js";

let model: CausalLM;
let server: RunningServer;
let client: OpenAI;

before(async () => {
  model = await loadModel(fixtureDir("qwen2"), { backend: "cpu", name: "tiny", contextLength: 2048 });
  server = await startServer({ model, port: 0, maxBatch: 8 });
  client = new OpenAI({ baseURL: `${server.url}/v1`, apiKey: "none", maxRetries: 0 });
});

after(async () => {
  await server.close();
  model.dispose();
});

const TOOLS = [{ type: "function" as const, function: { name: "run_sql", description: "run a query", parameters: { type: "object", properties: { query: { type: "string" } } } } }];
const MSGS = [{ role: "user" as const, content: "How many orders?" }];

async function until(what: string, ok: () => boolean, ms = HANG_GUARD_MS): Promise<void> {
  const end = Date.now() + ms;
  while (!ok()) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

/** Opens a long streamed generation and resolves once its first token arrived; `tokens()` counts them so far. */
async function longStream(maxTokens: number) {
  const abort = new AbortController();
  const res = await fetch(`${server.url}/v1/chat/completions`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ model: "tiny", messages: MSGS, max_tokens: maxTokens, ignore_eos: true, stream: true, logprobs: true, temperature: 1, seed: 1 }),
    signal: abort.signal,
  });
  const reader = res.body!.getReader();
  let tokens = 0;
  let done = false;
  let buf = "";
  const pump = (async () => {
    try {
      for (;;) {
        const { value, done: end } = await reader.read();
        if (end) break;
        buf += Buffer.from(value).toString("utf8");
        const events = buf.split("\n\n");
        buf = events.pop()!;
        for (const ev of events) {
          if (!ev.startsWith("data: {")) continue;
          const lp = JSON.parse(ev.slice(6)).choices?.[0]?.logprobs?.content as unknown[] | undefined;
          tokens += lp?.length ?? 0;
        }
      }
      done = true;
    } catch {
      // aborted
    }
  })();
  await until("the long stream's first token", () => tokens > 0);
  return { abort: () => abort.abort(), tokens: () => tokens, done: () => done, pump };
}

test("streamed deltas arrive per step and concatenate to the non-streamed text for the same seed (logprobs too)", async () => {
  for (const extra of [{}, { tools: TOOLS }, { tools: TOOLS, tool_choice: "none" as const }]) {
    const ask = { model: "tiny", messages: MSGS, max_tokens: 24, temperature: 1, seed: 11, logprobs: true, top_logprobs: 2, ...extra };
    const full = await client.chat.completions.create(ask);
    const stream = await client.chat.completions.create({ ...ask, stream: true });
    let text = "";
    let chunks = 0;
    const lps: number[] = [];
    for await (const chunk of stream) {
      for (const c of chunk.choices) {
        if (c.delta.content) {
          text += c.delta.content;
          chunks++;
        }
        for (const l of c.logprobs?.content ?? []) {
          lps.push(l.logprob);
          assert.equal(l.top_logprobs.length, 2);
        }
      }
    }
    assert.equal(text, full.choices[0].message.content ?? "", JSON.stringify(extra));
    assert.deepEqual(lps, full.choices[0].logprobs!.content!.map((l) => l.logprob));
    assert.equal(full.choices[0].logprobs!.content![0].top_logprobs.length, 2);
    if (text.length > 8) assert.ok(chunks > 1, `the reply came in ${chunks} content chunk(s)`);
  }
});

test("a client that disconnects frees its slot (streaming and not)", async () => {
  const before = server.engine.metrics().cancelled;
  const long = await longStream(1500);
  long.abort();
  await until("the streamed row's cancellation", () => server.engine.metrics().cancelled === before + 1 && server.engine.load().running === 0);
  const abort = new AbortController();
  const pending = fetch(`${server.url}/v1/chat/completions`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ model: "tiny", messages: MSGS, max_tokens: 1500, ignore_eos: true }), signal: abort.signal }).catch(() => null);
  await until("the plain request to start", () => server.engine.load().running === 1);
  abort.abort();
  await pending;
  await until("the plain row's cancellation", () => server.engine.metrics().cancelled === before + 2 && server.engine.load().running === 0);
});

test("fair admission: a short request sent after a huge one is answered while the huge one still runs", async () => {
  const long = await longStream(1800);
  const short = (await client.chat.completions.create({ model: "tiny", messages: [{ role: "user", content: "hi" }], max_tokens: 5, ignore_eos: true } as never)) as OpenAI.ChatCompletion;
  assert.equal(short.usage!.completion_tokens, 5);
  const at = long.tokens();
  assert.ok(!long.done() && at < 1800, `the long request had ${at} of 1800 tokens when the short one was answered`);
  long.abort();
  await long.pump;
});

test("tool_choice none renders no tools; required and named force a call through the prompt", async () => {
  const tokenize = async (body: unknown) => ((await (await fetch(`${server.url}/tokenize`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(body) })).json()) as { count: number }).count;
  const plain = await tokenize({ model: "tiny", messages: MSGS });
  const withTools = await tokenize({ model: "tiny", messages: MSGS, tools: TOOLS });
  assert.ok(withTools > plain);
  const none = await client.chat.completions.create({ model: "tiny", messages: MSGS, tools: TOOLS, tool_choice: "none", max_tokens: 4 });
  assert.equal(none.usage!.prompt_tokens, plain);
  assert.equal(none.choices[0].message.tool_calls, undefined);
  const named = await client.chat.completions.create({ model: "tiny", messages: MSGS, tools: TOOLS, tool_choice: { type: "function", function: { name: "run_sql" } }, max_tokens: 8 });
  assert.ok(named.usage!.prompt_tokens > withTools, "the call's opening is part of the prompt");
  assert.equal(named.choices[0].finish_reason, "length", "cut by max_tokens: OpenAI's contract");
  assert.equal(named.choices[0].message.content, null);
  const call = named.choices[0].message.tool_calls![0];
  assert.equal(call.type === "function" ? call.function.name : "", "run_sql");
  const required = await client.chat.completions.create({ model: "tiny", messages: MSGS, tools: TOOLS, tool_choice: "required", max_tokens: 8 });
  assert.equal(required.choices[0].finish_reason, "length");
  assert.equal(required.choices[0].message.tool_calls!.length, 1);
  const stream = await client.chat.completions.create({ model: "tiny", messages: MSGS, tools: TOOLS, tool_choice: { type: "function", function: { name: "run_sql" } }, max_tokens: 8, stream: true });
  let name = "";
  let finish = "";
  for await (const chunk of stream) {
    for (const c of chunk.choices) {
      name += c.delta.tool_calls?.[0]?.function?.name ?? "";
      finish = c.finish_reason ?? finish;
    }
  }
  assert.equal(name, "run_sql");
  assert.equal(finish, "length");
  for (const [choice, tools] of [["required", undefined], [{ type: "function", function: { name: "other" } }, TOOLS]] as const) {
    const r = await fetch(`${server.url}/v1/chat/completions`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ model: "tiny", messages: MSGS, tools, tool_choice: choice }) });
    assert.equal(r.status, 400);
    assert.equal(((await r.json()) as { error: { param: string } }).error.param, "tool_choice");
  }
});
