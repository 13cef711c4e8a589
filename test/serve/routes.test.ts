import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import OpenAI from "openai";
import { loadModel } from "../../lib/model/load.js";
import type { CausalLM } from "../../lib/model/model.js";
import { startServer, type RunningServer } from "../../lib/serve/server.js";
import { fixtureDir } from "../model/fixtures.js";

let model: CausalLM;
let server: RunningServer;
let client: OpenAI;

before(async () => {
  model = await loadModel(fixtureDir("qwen2"), { backend: "cpu", name: "tiny", contextLength: 512 });
  server = await startServer({ model, adapters: { sql: fixtureDir("qwen2-lora") }, port: 0, allowRuntimeLora: true });
  client = new OpenAI({ baseURL: `${server.url}/v1`, apiKey: "none", maxRetries: 0 });
});

after(async () => {
  await server.close();
  model.dispose();
});

const MSGS = [{ role: "user", content: "How many orders?" }];

async function post(path: string, body: unknown): Promise<{ status: number; json: any; text: string }> {
  const res = await fetch(`${server.url}${path}`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(body) });
  const text = await res.text();
  let json: unknown = null;
  try {
    json = JSON.parse(text);
  } catch {
    // plain-text answers (the adapter routes)
  }
  return { status: res.status, json, text };
}

test("max_tokens beyond the context is a 400, as in vLLM; one that fits is served", async () => {
  const { json: tok } = await post("/tokenize", { model: "tiny", messages: MSGS });
  const room = 512 - tok.count;
  const over = await post("/v1/chat/completions", { model: "tiny", messages: MSGS, max_tokens: room + 1 });
  assert.equal(over.status, 400);
  assert.equal(over.json.error.param, "max_tokens");
  assert.match(over.json.error.message, /maximum context length is 512/);
  const overStream = await post("/v1/chat/completions", { model: "tiny", messages: MSGS, max_tokens: 10_000_000, stream: true });
  assert.equal(overStream.status, 400);
  const overCompletion = await post("/v1/completions", { model: "tiny", prompt: [1, 2, 3], max_tokens: 510 });
  assert.equal(overCompletion.status, 400);
  const fits = await post("/v1/chat/completions", { model: "tiny", messages: MSGS, max_tokens: room, temperature: 0, logit_bias: { "2": 100 } });
  assert.equal(fits.status, 200);
});

test("parameters that would change the output and are not honoured are 400s naming them; harmless ones are accepted", async () => {
  for (const [key, value] of [["repetition_penalty", 1.2], ["min_p", 0.1], ["guided_regex", "a+"], ["response_format", { type: "yaml" }], ["best_of", 3], ["use_beam_search", true], ["typical_p", 0.5], ["frobnicate", 1]] as const) {
    const r = await post("/v1/chat/completions", { model: "tiny", messages: MSGS, max_tokens: 2, [key]: value });
    assert.equal(r.status, 400, key);
    assert.equal(r.json.error.param, key);
    assert.match(r.json.error.message, new RegExp(key));
  }
  const badSchema = await post("/v1/chat/completions", { model: "tiny", messages: MSGS, max_tokens: 2, tools: [{ type: "function", function: { name: "f", parameters: "notaschema" } }] });
  assert.equal(badSchema.status, 400);
  assert.equal(badSchema.json.error.param, "tools[0].function.parameters");
  for (const [key, value] of [["suffix", "x"], ["best_of", 3], ["min_p", 0.2]] as const) {
    const r = await post("/v1/completions", { model: "tiny", prompt: "a", max_tokens: 2, [key]: value });
    assert.equal(r.status, 400, key);
    assert.equal(r.json.error.param, key);
  }
  const ok = await post("/v1/chat/completions", {
    model: "tiny", messages: MSGS, max_tokens: 2, user: "u1", metadata: { a: "b" }, store: false, parallel_tool_calls: true, service_tier: "auto",
    stream_options: null, repetition_penalty: 1, min_p: 0, use_beam_search: false, response_format: { type: "text" }, guided_json: null,
  });
  assert.equal(ok.status, 200, JSON.stringify(ok.json));
});

test("vLLM's top_k / min_tokens / ignore_eos / stop_token_ids and OpenAI's logit_bias are honoured", async () => {
  const forced = await client.chat.completions.create({ model: "tiny", messages: MSGS, max_tokens: 3, temperature: 0, logit_bias: { "42": 100 }, ignore_eos: true } as never) as OpenAI.ChatCompletion;
  const { json: forty2 } = await post("/detokenize", { model: "tiny", tokens: [42, 42, 42] });
  assert.equal(forced.choices[0].message.content, forty2.prompt);
  const stopped = await post("/v1/chat/completions", { model: "tiny", messages: MSGS, max_tokens: 5, temperature: 0, logit_bias: { "42": 100 }, stop_token_ids: [42] });
  assert.equal(stopped.json.usage.completion_tokens, 1);
  assert.equal(stopped.json.choices[0].finish_reason, "stop");
  const banned = await post("/v1/chat/completions", { model: "tiny", messages: MSGS, max_tokens: 6, min_tokens: 6, top_k: 3, temperature: 1, seed: 2, logit_bias: { "2": 100 } });
  assert.equal(banned.json.usage.completion_tokens, 6, "eos (id 2) is banned until min_tokens");
  const eos = await post("/v1/chat/completions", { model: "tiny", messages: MSGS, max_tokens: 6, temperature: 0, logit_bias: { "2": 100 } });
  assert.equal(eos.json.usage.completion_tokens, 1);
  const ignored = await post("/v1/chat/completions", { model: "tiny", messages: MSGS, max_tokens: 6, temperature: 0, logit_bias: { "2": 100 }, ignore_eos: true });
  assert.equal(ignored.json.usage.completion_tokens, 6);
  const bad = await post("/v1/chat/completions", { model: "tiny", messages: MSGS, logit_bias: { "99999": 1 } });
  assert.equal(bad.status, 400);
  assert.equal(bad.json.error.param, "logit_bias");
});

test("POST /v1/completions: text and token-id prompts, n, echo, logprobs counts, streaming", async () => {
  const r = await client.completions.create({ model: "tiny", prompt: "SELECT", max_tokens: 6, temperature: 1, seed: 3, n: 2, logprobs: 2 });
  assert.equal(r.object, "text_completion");
  assert.equal(r.choices.length, 2);
  for (const c of r.choices) {
    assert.equal(c.logprobs!.tokens!.length, c.logprobs!.token_logprobs!.length);
    assert.equal(Object.keys(c.logprobs!.top_logprobs![0]).length <= 2, true);
    assert.equal(c.logprobs!.tokens!.join(""), c.text);
  }
  const { json: ids } = await post("/tokenize", { model: "tiny", prompt: "SELECT" });
  const byIds = await client.completions.create({ model: "tiny", prompt: ids.tokens, max_tokens: 6, temperature: 1, seed: 3, n: 2 });
  assert.deepEqual(byIds.choices.map((c) => c.text), r.choices.map((c) => c.text));
  assert.equal(byIds.usage!.prompt_tokens, ids.count);
  const batch = await client.completions.create({ model: "tiny", prompt: ["a", "b"], max_tokens: 3, temperature: 0, echo: true });
  assert.deepEqual(batch.choices.map((c) => c.index), [0, 1]);
  assert.ok(batch.choices[0].text.startsWith("a") && batch.choices[1].text.startsWith("b"));
  const stream = await client.completions.create({ model: "tiny", prompt: "SELECT", max_tokens: 6, temperature: 1, seed: 3, n: 2, stream: true });
  const texts = ["", ""];
  for await (const chunk of stream) for (const c of chunk.choices) texts[c.index] += c.text;
  assert.deepEqual(texts, r.choices.map((c) => c.text));
});

test("/tokenize and /detokenize round-trip (prompt and messages forms); GET /v1/models/{id}", async () => {
  const text = "SELECT count(*) FROM orders;";
  const t = await post("/tokenize", { model: "tiny", prompt: text, return_token_strs: true });
  assert.equal(t.status, 200);
  assert.equal(t.json.count, t.json.tokens.length);
  assert.equal(t.json.max_model_len, 512);
  assert.equal(t.json.token_strs.length, t.json.count);
  assert.equal((await post("/detokenize", { model: "tiny", tokens: t.json.tokens })).json.prompt, text);
  const chat = await post("/tokenize", { model: "tiny", messages: MSGS, add_generation_prompt: true });
  const rendered = (await post("/detokenize", { model: "tiny", tokens: chat.json.tokens })).json.prompt as string;
  assert.ok(rendered.includes("How many orders?"));
  const served = await client.chat.completions.create({ model: "tiny", messages: MSGS as never, max_tokens: 1 });
  assert.equal(served.usage!.prompt_tokens, chat.json.count);
  assert.equal((await post("/detokenize", { model: "tiny", tokens: [-1] })).status, 400);
  assert.equal((await post("/tokenize", { model: "nope", prompt: "x" })).status, 404);
  const card = await client.models.retrieve("sql");
  assert.equal(card.id, "sql");
  assert.equal((card as unknown as { parent: string }).parent, "tiny");
  const missing = await fetch(`${server.url}/v1/models/nope`);
  assert.equal(missing.status, 404);
});

test("GET /metrics is Prometheus text with vLLM's request gauges and the kit's own figures", async () => {
  const first = await client.chat.completions.create({ model: "tiny", messages: MSGS as never, max_tokens: 3 });
  const res = await fetch(`${server.url}/metrics`);
  assert.match(res.headers.get("content-type") ?? "", /^text\/plain/);
  const text = await res.text();
  for (const line of text.trim().split("\n")) {
    assert.match(line, /^(# (HELP|TYPE) [a-z0-9_:]+ .+|[a-zA-Z_:][a-zA-Z0-9_:]*\{[^}]*\} -?[0-9.e+-]+)$/, line);
  }
  const value = (name: string) => Number(new RegExp(`^${name}\\{[^}]*\\} (\\S+)$`, "m").exec(text)?.[1]);
  for (const name of ["vllm:num_requests_running", "vllm:num_requests_waiting", "t2s_generation_tokens_per_second", "t2s_mean_batch_size"]) assert.ok(Number.isFinite(value(name)), name);
  assert.ok(value("vllm:generation_tokens_total") >= 3);
  assert.ok(value("vllm:e2e_request_latency_seconds_count") >= 1);
  assert.match(text, /# TYPE vllm:e2e_request_latency_seconds histogram/);
  assert.match(text, /vllm:e2e_request_latency_seconds_bucket\{model_name="tiny",le="\+Inf"\} \d+/);
  for (const name of ["vllm:kv_cache_usage_perc", "vllm:request_queue_time_seconds_count", "vllm:time_per_output_token_seconds_count", "vllm:time_to_first_token_seconds_count", "vllm:lora_requests_info"]) assert.ok(Number.isFinite(value(name)), name);
  // request_success_total counts requests (n = 3 is one), and TTFT is recorded for non-streamed requests too
  const successes = (t: string) => [...t.matchAll(/^vllm:request_success_total\{[^}]*\} (\d+)$/gm)].reduce((n, m) => n + Number(m[1]), 0);
  const before = successes(text);
  const ttftBefore = value("vllm:time_to_first_token_seconds_count");
  await client.chat.completions.create({ model: "tiny", messages: MSGS as never, max_tokens: 3, n: 3 });
  const after = await (await fetch(`${server.url}/metrics`)).text();
  assert.equal(successes(after), before + 1);
  // the three rows of the same prompt find its full blocks (all but the sampled last token's) in the prefix cache
  const counter = (t: string, name: string) => Number(new RegExp(`^${name}\\{[^}]*\\} (\\S+)$`, "m").exec(t)?.[1]);
  const prompt = first.usage!.prompt_tokens;
  assert.equal(counter(after, "vllm:prefix_cache_queries_total") - counter(text, "vllm:prefix_cache_queries_total"), 3 * prompt);
  assert.equal(counter(after, "vllm:prefix_cache_hits_total") - counter(text, "vllm:prefix_cache_hits_total"), 3 * 16 * Math.floor((prompt - 1) / 16));
  assert.equal(Number(/^vllm:time_to_first_token_seconds_count\{[^}]*\} (\S+)$/m.exec(after)?.[1]), ttftBefore + 1);
});

test("runtime adapters: load_lora_adapter serves a merged copy by name, unload_lora_adapter removes it", async () => {
  const ask = (m: string) => client.chat.completions.create({ model: m, messages: MSGS as never, max_tokens: 6, temperature: 1, seed: 9 });
  const loaded = await post("/v1/load_lora_adapter", { lora_name: "sql2", lora_path: fixtureDir("qwen2-lora") });
  assert.equal(loaded.status, 200);
  assert.match(loaded.text, /Success/);
  assert.deepEqual((await client.models.list()).data.map((m) => m.id).sort(), ["sql", "sql2", "tiny"]);
  assert.equal((await ask("sql2")).choices[0].message.content, (await ask("sql")).choices[0].message.content);
  assert.equal((await post("/v1/load_lora_adapter", { lora_name: "sql2", lora_path: fixtureDir("qwen2-lora") })).status, 400);
  const missing = await post("/v1/load_lora_adapter", { lora_name: "x", lora_path: "/nonexistent/adapter" });
  assert.equal(missing.status, 400);
  assert.match(missing.json.error.message, /no adapter folder at .\/nonexistent\/adapter./);
  assert.equal((await post("/v1/unload_lora_adapter", { lora_name: "sql2" })).status, 200);
  assert.equal((await post("/v1/chat/completions", { model: "sql2", messages: MSGS })).status, 404);
  assert.equal((await post("/v1/unload_lora_adapter", { lora_name: "sql2" })).status, 404);
  assert.equal((await post("/v1/unload_lora_adapter", { lora_name: "tiny" })).status, 400);
  assert.ok(server.engine.metrics().generatedTokens > 0);
});
