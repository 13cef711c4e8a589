import { test } from "node:test";
import assert from "node:assert/strict";
import { OpenAIPolicy, defaultTimeoutMs, parseOpenAISpec, retryAfterMs } from "../../lib/policy/openai.js";
import { PolicyError } from "../../lib/policy/types.js";
import { startFakeOpenAI, scriptedResponder } from "../support/fake-openai.js";

const msgs = (q: string) => [{ role: "system" as const, content: "sys" }, { role: "user" as const, content: q }];

test("parseOpenAISpec splits model and URL and adds /v1 to a bare host", () => {
  assert.deepEqual(parseOpenAISpec("qwen@http://localhost:8000"), { model: "qwen", baseUrl: "http://localhost:8000/v1", baseUrls: ["http://localhost:8000/v1"] });
  assert.deepEqual(parseOpenAISpec("org/m-1@http://h:1/v1/"), { model: "org/m-1", baseUrl: "http://h:1/v1", baseUrls: ["http://h:1/v1"] });
  assert.throws(() => parseOpenAISpec("qwen"), /openai:<model>@/);
});

test("defaultTimeoutMs is max(300 s, max_tokens / 4 tokens per s)", () => {
  assert.equal(defaultTimeoutMs(undefined), 300_000);
  assert.equal(defaultTimeoutMs(4096), 1_024_000);
});

test("a plain reply comes back with text, token counts and finish reason; sampling options are sent", async () => {
  const server = await startFakeOpenAI(scriptedResponder([{ match: "q1", turns: [{ content: "```sql\nSELECT 1\n```" }] }]));
  const p = new OpenAIPolicy("m", server.baseUrl, { apiKey: "k" });
  try {
    const [c] = await p.complete(msgs("q1"), { temperature: 0.7, top_p: 0.9, max_tokens: 64, seed: 5 });
    assert.equal(c.text, "```sql\nSELECT 1\n```");
    assert.equal(c.finish_reason, "stop");
    assert.ok(c.tokens_in > 0 && c.tokens_out > 0);
    const body = server.requests[0].body;
    assert.equal(body.temperature, 0.7);
    assert.equal(body.top_p, 0.9);
    assert.equal(body.max_tokens, 64);
    assert.equal(body.seed, 5);
    assert.equal(body.model, "m");
  } finally {
    await p.close();
    await server.close();
  }
});

test("native tool calls and a length finish are parsed", async () => {
  const server = await startFakeOpenAI(scriptedResponder([
    { match: "tool", turns: [{ tool_calls: [{ name: "execute_sql_query", arguments: { query: "SELECT 2" } }] }] },
    { match: "long", turns: [{ content: "SELECT", finish_reason: "length" }] },
  ]));
  const p = new OpenAIPolicy("m", server.baseUrl);
  try {
    const [c] = await p.complete(msgs("tool"), { tools: [] });
    assert.equal(c.finish_reason, "tool_calls");
    assert.equal(c.tool_calls[0].function.name, "execute_sql_query");
    assert.deepEqual(JSON.parse(c.tool_calls[0].function.arguments), { query: "SELECT 2" });
    const [d] = await p.complete(msgs("long"), {});
    assert.equal(d.finish_reason, "length");
  } finally {
    await p.close();
    await server.close();
  }
});

test("500s and 429s are retried and reported as re-rolls, then the answer arrives", async () => {
  const server = await startFakeOpenAI(scriptedResponder([
    { match: "flaky", turns: [[{ status: 500 }, { status: 429 }, { status: 502 }, { content: "ok" }]] },
  ]));
  const p = new OpenAIPolicy("m", server.baseUrl, { backoffMs: 1 });
  const reasons: string[] = [];
  try {
    const [c] = await p.complete(msgs("flaky"), { seed: 1, onRetry: (r) => reasons.push(r) });
    assert.equal(c.text, "ok");
    assert.deepEqual(reasons, ["http_500", "http_429", "http_502"]);
  } finally {
    await p.close();
    await server.close();
  }
});

test("retries run out -> a retryable PolicyError; 401 -> fatal setup error; 400 too long, unsizable -> context_exceeded setup error", async () => {
  const server = await startFakeOpenAI(scriptedResponder([
    { match: "down", turns: [{ status: 503 }] },
    { match: "auth", turns: [{ status: 401 }] },
    { match: "huge", turns: [{ status: 400, body: '{"error":{"message":"This model\'s maximum context length is 4096 tokens"}}' }] },
  ]));
  const p = new OpenAIPolicy("m", server.baseUrl, { backoffMs: 1, retries: 2 });
  try {
    await assert.rejects(p.complete(msgs("down"), {}), (e: unknown) => e instanceof PolicyError && e.retryable && e.reason === "http_503");
    assert.equal(server.statusCounts[503], 3);
    await assert.rejects(p.complete(msgs("auth"), {}), (e: unknown) => e instanceof PolicyError && e.fatal && e.setup && e.reason === "auth");
    await assert.rejects(p.complete(msgs("huge"), {}), (e: unknown) => e instanceof PolicyError && !e.fatal && e.setup && e.reason === "context_exceeded");
  } finally {
    await p.close();
    await server.close();
  }
});

test("a server that never answers hits the per-request timeout, which is retried", async () => {
  const server = await startFakeOpenAI(scriptedResponder([{ match: "slow", turns: [[{ hang: true }, { content: "late but fine" }]] }]));
  const p = new OpenAIPolicy("m", server.baseUrl, { backoffMs: 1, timeoutMs: 150 });
  const reasons: string[] = [];
  try {
    const [c] = await p.complete(msgs("slow"), { onRetry: (r) => reasons.push(r) });
    assert.equal(c.text, "late but fine");
    assert.deepEqual(reasons, ["timeout"]);
  } finally {
    await p.close();
    await server.close();
  }
});

test("a refused connection is a retryable 'connection' error", async () => {
  const server = await startFakeOpenAI(() => ({ content: "x" }));
  const base = server.baseUrl;
  await server.close();
  const p = new OpenAIPolicy("m", base, { backoffMs: 1, retries: 1 });
  const reasons: string[] = [];
  await assert.rejects(p.complete(msgs("q"), { onRetry: (r) => reasons.push(r) }), (e: unknown) => e instanceof PolicyError && e.reason === "connection");
  assert.deepEqual(reasons, ["connection"]);
  await p.close();
});

test("the concurrency limit caps requests in flight", async () => {
  let inFlight = 0;
  let peak = 0;
  let release: () => void = () => {};
  const gate = new Promise<void>((r) => (release = r));
  const server = await startFakeOpenAI(async () => {
    inFlight++;
    peak = Math.max(peak, inFlight);
    if (peak >= 3) release();
    await gate;
    inFlight--;
    return { content: "ok" };
  });
  const p = new OpenAIPolicy("m", server.baseUrl, { concurrency: 3 });
  try {
    await Promise.all(Array.from({ length: 10 }, (_, i) => p.complete(msgs(`q${i}`), {})));
    assert.equal(peak, 3);
    assert.equal(server.requests.length, 10);
  } finally {
    await p.close();
    await server.close();
  }
});

test("warmup waits through 503s until the server is ready", async () => {
  const server = await startFakeOpenAI(() => ({ content: "OK" }), { readyAfterMs: 300 });
  const p = new OpenAIPolicy("m", server.baseUrl, { backoffMs: 50 });
  try {
    await p.warmup(20_000, 50);
    assert.ok((server.statusCounts[503] ?? 0) >= 1);
    assert.ok((server.statusCounts[200] ?? 0) >= 2);
  } finally {
    await p.close();
    await server.close();
  }
});

test("Retry-After is read as seconds or a date and carried on the error", async () => {
  assert.equal(retryAfterMs("2"), 2000);
  assert.equal(retryAfterMs(new Date(10_000).toUTCString(), 4_000), 6000);
  assert.equal(retryAfterMs(undefined), undefined);
  assert.equal(retryAfterMs("soon"), undefined);
  const server = await startFakeOpenAI(scriptedResponder([{ match: "busy", turns: [{ status: 429, headers: { "retry-after": "0" } }] }]));
  const p = new OpenAIPolicy("m", server.baseUrl, { backoffMs: 1, retries: 1 });
  try {
    await assert.rejects(p.complete(msgs("busy"), {}), (e: unknown) => e instanceof PolicyError && e.reason === "http_429" && e.retryAfterMs === 0);
    assert.equal(server.statusCounts[429], 2);
  } finally {
    await p.close();
    await server.close();
  }
});

test("tools are sent without forcing tool_choice; tool messages go out without a name", async () => {
  const server = await startFakeOpenAI(() => ({ content: "ok" }));
  const p = new OpenAIPolicy("m", server.baseUrl);
  try {
    await p.complete([
      { role: "user", content: "q" },
      { role: "assistant", content: "", tool_calls: [{ id: "c1", type: "function", function: { name: "execute_sql_query", arguments: "{}" } }] },
      { role: "tool", tool_call_id: "c1", name: "execute_sql_query", content: "n\n1" },
    ], { tools: [{ type: "function", function: { name: "execute_sql_query", description: "d", parameters: {} } }] });
    const body = server.requests[0].body;
    assert.equal(body.tool_choice, undefined);
    assert.equal((body.tools as unknown[]).length, 1);
    const tool = (body.messages as Array<Record<string, unknown>>)[2];
    assert.deepEqual(tool, { role: "tool", content: "n\n1", tool_call_id: "c1" });
  } finally {
    await p.close();
    await server.close();
  }
});
