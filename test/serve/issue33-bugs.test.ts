// The three bugs of issue 33, reproduced against a running server: a huge prompt must not stop /health or
// a running stream; body keys named like Object.prototype's members are ordinary unknown parameters; a
// forced tool call cut by max_tokens ends with "length".
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { loadModel } from "../../lib/model/load.js";
import type { CausalLM } from "../../lib/model/model.js";
import { startServer, type RunningServer } from "../../lib/serve/server.js";
import { fixtureDir } from "../model/fixtures.js";

let model: CausalLM;
let server: RunningServer;

before(async () => {
  model = await loadModel(fixtureDir("qwen2"), { backend: "cpu", name: "tiny", contextLength: 2048 });
  server = await startServer({ model, port: 0 });
});

after(async () => {
  await server.close();
  model.dispose();
});

async function post(path: string, body: unknown): Promise<{ status: number; json: any }> {
  const res = await fetch(`${server.url}${path}`, { method: "POST", headers: { "content-type": "application/json" }, body: typeof body === "string" ? body : JSON.stringify(body) });
  const text = await res.text();
  try {
    return { status: res.status, json: JSON.parse(text) };
  } catch {
    return { status: res.status, json: text };
  }
}

/** Varied text (no two lines alike, so no cache can help), about `bytes` long. */
function bigText(bytes: number): string {
  const parts: string[] = [];
  let n = 0;
  for (let i = 0; n < bytes; i++) {
    const line = `row ${i} SELECT name, price FROM products WHERE id = ${(i * 7919) % 100003} AND note = 'x${i.toString(36)}';\n`;
    parts.push(line);
    n += line.length;
  }
  return parts.join("");
}

/** One trial: a stream runs while the big prompts are refused; the worst /health time and stream gap in the window and how often /health answered (the stream is awaited to its end). */
async function bigPromptTrial(): Promise<{ health: number; gap: number; statuses: { status: number; json: any }[]; healthAnswers: number }> {
  const arrivals: number[] = [];
  const streamDone = (async () => {
    const res = await fetch(`${server.url}/v1/completions`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ model: "tiny", prompt: "SELECT", max_tokens: 300, ignore_eos: true, temperature: 1, seed: 1, logprobs: 0, stream: true }) });
    const reader = res.body!.getReader();
    for (;;) {
      const { done } = await reader.read();
      if (done) break;
      arrivals.push(performance.now());
    }
  })();
  // the bodies are built before the window: the client shares this process's event loop with the server
  const big = bigText(1024 * 1024);
  const bodies: [string, string][] = [
    ["/v1/completions", JSON.stringify({ model: "tiny", prompt: big, max_tokens: 4 })],
    ["/v1/chat/completions", JSON.stringify({ model: "tiny", messages: [{ role: "user", content: big }], max_tokens: 4 })],
    ["/tokenize", JSON.stringify({ model: "tiny", prompt: big })],
    // under the byte bound but over the context: tokenized off the event loop, then refused
    ["/v1/completions", JSON.stringify({ model: "tiny", prompt: bigText(12 * 1024), max_tokens: 4 })],
    ["/v1/completions", JSON.stringify({ model: "tiny", prompt: bigText(24 * 1024), max_tokens: 4 })],
  ];
  let ended = false;
  void streamDone.then(() => (ended = true));
  while (arrivals.length < 20 && !ended) await new Promise((r) => setTimeout(r, 5));
  assert.ok(!ended, "the stream ended before the window");
  const health: number[] = [];
  let polling = true;
  const poller = (async () => {
    while (polling) {
      const t = performance.now();
      await (await fetch(`${server.url}/health`)).json();
      health.push(performance.now() - t);
      await new Promise((r) => setTimeout(r, 10));
    }
  })();
  const windowStart = performance.now();
  const statuses = [];
  for (const [path, body] of bodies) statuses.push(await post(path, body));
  const windowEnd = performance.now();
  polling = false;
  await poller;
  await streamDone;
  const gaps = arrivals.slice(1).map((t, i) => [t, t - arrivals[i]]).filter(([t]) => t >= windowStart && t <= windowEnd + 50).map(([, g]) => g);
  return { health: Math.max(...health), gap: Math.max(0, ...gaps), statuses, healthAnswers: health.length };
}

test("a 1 MB prompt is refused while /health answers and a running stream goes on to its end", async (t) => {
  // refusals and liveness are asserted; the latencies are reported, not asserted (a loaded machine stretches
  // them without any fault of the server): bench:serve measures /health latency under load
  const trial = await bigPromptTrial();
  for (const r of trial.statuses) {
    assert.equal(r.status, 400, JSON.stringify(r.json).slice(0, 300));
    assert.equal(r.json.error.code, "context_length_exceeded");
  }
  assert.ok(trial.healthAnswers > 0, "/health answered while the big prompts were refused");
  t.diagnostic(`worst /health ${trial.health.toFixed(0)} ms, worst stream gap ${trial.gap.toFixed(0)} ms`);
});

test("body keys named like Object.prototype's members are unknown parameters (a 400 naming them), on every route", async () => {
  for (const key of ["__proto__", "constructor", "valueOf", "hasOwnProperty", "toString", "isPrototypeOf"]) {
    const bodies: [string, string][] = [
      ["/v1/chat/completions", `{"model": "tiny", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 1, "${key}": {"a": 1}}`],
      ["/v1/completions", `{"model": "tiny", "prompt": "hi", "max_tokens": 1, "${key}": 1}`],
      ["/tokenize", `{"model": "tiny", "prompt": "hi", "${key}": "x"}`],
      ["/detokenize", `{"model": "tiny", "tokens": [1, 2], "${key}": true}`],
    ];
    for (const [path, body] of bodies) {
      const r = await post(path, body);
      assert.equal(r.status, 400, `${path} ${key}: ${JSON.stringify(r.json)}`);
      assert.equal(r.json.error.param, key, path);
      assert.ok(r.json.error.message.includes(`'${key}'`), r.json.error.message);
    }
  }
});

test("every unknown parameter is named in one 400", async () => {
  const r = await post("/v1/chat/completions", { model: "tiny", messages: [{ role: "user", content: "hi" }], frobnicate: 1, wibble: 2, repetition_penalty: 1.3 });
  assert.equal(r.status, 400);
  for (const k of ["frobnicate", "wibble", "repetition_penalty"]) assert.ok(r.json.error.message.includes(`'${k}'`), r.json.error.message);
});

test("a forced tool call cut by max_tokens ends with finish_reason length (streaming and not)", async () => {
  const tools = [{ type: "function", function: { name: "execute_sql", description: "run a query", parameters: { type: "object", properties: { sql: { type: "string" } }, required: ["sql"] } } }];
  for (const tool_choice of ["required", { type: "function", function: { name: "execute_sql" } }]) {
    const r = await post("/v1/chat/completions", { model: "tiny", messages: [{ role: "user", content: "count orders" }], tools, tool_choice, max_tokens: 2, temperature: 1, seed: 3 });
    assert.equal(r.status, 200, JSON.stringify(r.json));
    assert.equal(r.json.choices[0].finish_reason, "length", JSON.stringify(r.json.choices[0]));
    const res = await fetch(`${server.url}/v1/chat/completions`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ model: "tiny", messages: [{ role: "user", content: "count orders" }], tools, tool_choice, max_tokens: 2, temperature: 1, seed: 3, stream: true }) });
    const text = await res.text();
    const finishes = [...text.matchAll(/"finish_reason":"(\w+)"/g)].map((m) => m[1]);
    assert.deepEqual(finishes, ["length"], text);
    assert.ok(text.trimEnd().endsWith("data: [DONE]"));
  }
});

test("stricter validation and vLLM's extras: invalid UTF-8, min_tokens > max_tokens, token ids as names, truncated prompts, template kwargs", async () => {
  const bad = await fetch(`${server.url}/v1/chat/completions`, { method: "POST", headers: { "content-type": "application/json" }, body: Buffer.concat([Buffer.from('{"model": "tiny", "messages": [{"role": "user", "content": "'), Buffer.from([0xff, 0xfe]), Buffer.from('"}]}')]) });
  assert.equal(bad.status, 400);
  assert.match(((await bad.json()) as { error: { message: string } }).error.message, /UTF-8/);
  const minmax = await post("/v1/chat/completions", { model: "tiny", messages: [{ role: "user", content: "hi" }], max_tokens: 2, min_tokens: 5 });
  assert.equal(minmax.status, 400);
  assert.equal(minmax.json.error.param, "min_tokens");
  const ids = await post("/v1/chat/completions", { model: "tiny", messages: [{ role: "user", content: "hi" }], max_tokens: 3, logprobs: true, return_tokens_as_token_ids: true, temperature: 0 });
  assert.equal(ids.status, 200);
  for (const e of ids.json.choices[0].logprobs.content) assert.match(e.token, /^token_id:\d+$/);
  const cut = await post("/v1/completions", { model: "tiny", prompt: "SELECT name FROM products WHERE price > 10", max_tokens: 1, truncate_prompt_tokens: 3 });
  assert.equal(cut.json.usage.prompt_tokens, 3);
  const chatCut = await post("/v1/chat/completions", { model: "tiny", messages: [{ role: "user", content: "SELECT name FROM products" }], max_tokens: 1, truncate_prompt_tokens: 4 });
  assert.equal(chatCut.json.usage.prompt_tokens, 4);
  const kw = await post("/v1/chat/completions", { model: "tiny", messages: [{ role: "user", content: "hi" }], max_tokens: 1, chat_template_kwargs: { enable_thinking: false } });
  assert.equal(kw.status, 200);
  assert.equal((await post("/v1/chat/completions", { model: "tiny", messages: [{ role: "user", content: "hi" }], chat_template_kwargs: { messages: [] } })).status, 400);
});

test("echo with logprobs and max_tokens 0 scores a prompt (lm-eval's log-likelihood): the prompt's raw logprobs", async () => {
  const { json: tok } = await post("/tokenize", { model: "tiny", prompt: "SELECT count(*) FROM orders" });
  const next = await post("/v1/completions", { model: "tiny", prompt: tok.tokens, max_tokens: 1, temperature: 0, logprobs: 1 });
  assert.equal(next.status, 200, JSON.stringify(next.json));
  const { json: one } = await post("/tokenize", { model: "tiny", prompt: next.json.choices[0].text, add_special_tokens: false });
  const scored = await post("/v1/completions", { model: "tiny", prompt: [...tok.tokens, ...one.tokens], max_tokens: 0, echo: true, logprobs: 2 });
  assert.equal(scored.status, 200, JSON.stringify(scored.json));
  const lp = scored.json.choices[0].logprobs;
  assert.equal(scored.json.choices[0].finish_reason, "length");
  assert.equal(lp.token_logprobs.length, tok.count + one.count);
  assert.equal(lp.token_logprobs[0], null);
  assert.ok(lp.token_logprobs.slice(1).every((x: number) => x <= 0));
  if (one.count === 1) assert.ok(Math.abs(lp.token_logprobs.at(-1) - next.json.choices[0].logprobs.token_logprobs[0]) < 1e-4, "the scored token's logprob is the one it was generated with");
  assert.equal(scored.json.usage.completion_tokens, 0);
});

test("include_stop_str_in_output, skip_special_tokens false, add_special_tokens and continuous_usage_stats are honoured", async () => {
  const base = { model: "tiny", prompt: "SELECT", max_tokens: 12, temperature: 0, ignore_eos: true };
  const plain = await post("/v1/completions", base);
  const text: string = plain.json.choices[0].text;
  if (text.length >= 4) {
    const stop = text.slice(2, 4);
    const cut = await post("/v1/completions", { ...base, stop: [stop] });
    const kept = await post("/v1/completions", { ...base, stop: [stop], include_stop_str_in_output: true });
    assert.equal(kept.json.choices[0].text, cut.json.choices[0].text + stop);
  }
  const special = await post("/v1/completions", { ...base, max_tokens: 2, logit_bias: { "2": 100 }, skip_special_tokens: false });
  assert.equal(special.status, 200);
  const { json: eos } = await post("/detokenize", { model: "tiny", tokens: [2, 2] });
  assert.equal(special.json.choices[0].text, eos.prompt.slice(0, special.json.choices[0].text.length));
  const msgs = [{ role: "user", content: "hi" }];
  const a = await post("/v1/chat/completions", { model: "tiny", messages: msgs, max_tokens: 1 });
  const b = await post("/v1/chat/completions", { model: "tiny", messages: msgs, max_tokens: 1, add_special_tokens: true });
  assert.equal(b.status, 200);
  assert.ok(b.json.usage.prompt_tokens >= a.json.usage.prompt_tokens);
  const res = await fetch(`${server.url}/v1/chat/completions`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ model: "tiny", messages: msgs, max_tokens: 4, ignore_eos: true, stream: true, stream_options: { include_usage: true, continuous_usage_stats: true } }) });
  const chunks = (await res.text()).split("\n\n").filter((e) => e.startsWith("data: {")).map((e) => JSON.parse(e.slice(6)));
  assert.ok(chunks.every((c) => c.usage && c.usage.prompt_tokens === a.json.usage.prompt_tokens), "every chunk carries the usage");
  assert.equal(chunks.at(-1).usage.completion_tokens, 4);
});

test("error messages never show the server's file paths", async () => {
  const { asRequestError } = await import("../../lib/serve/errors.js");
  const { T2sError } = await import("../../lib/core/errors.js");
  const e = asRequestError(new T2sError("chat_template_failed", "/srv/models/secret-model: rendering the chat template failed: x is undefined"));
  assert.equal(e.status, 400);
  assert.ok(!e.message.includes("/srv/models"), e.message);
  assert.ok(!asRequestError(new Error("ENOENT: no such file '/home/me/w.bin'")).message.includes("/home/me"));
});
