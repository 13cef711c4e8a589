import { test } from "node:test";
import assert from "node:assert/strict";
import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { OpenAIPolicy } from "../../lib/policy/openai.js";
import { isContextRefusal, readContextRefusal, serverRoot } from "../../lib/policy/context.js";
import { PolicyError } from "../../lib/policy/types.js";

test("a context refusal is read in vLLM's (old and new) and t2s serve's wordings", () => {
  const oldVllm = "This model's maximum context length is 4096 tokens. However, you requested 4300 tokens (252 in the messages, 4048 in the completion). Please reduce the length of the messages or completion.";
  const newVllm = "'max_tokens' or 'max_completion_tokens' is too large: 4048. This model's maximum context length is 4096 tokens and your request has 252 input tokens (4048 > 4096 - 252).";
  const promptOnly = "This model's maximum context length is 4096 tokens. However, your request has 5000 input tokens. Please reduce the length of the input messages.";
  const kit = "this model's maximum context length is 2048 tokens, but 2300 were requested (252 in the prompt, 2048 in the completion); reduce the prompt or max_tokens (at most 1796 here)";
  const kitPrompt = "the prompt has 2100 tokens but shop-sql-4m takes at most 2048";
  assert.deepEqual(readContextRefusal(oldVllm), { limit: 4096, prompt: 252 });
  assert.deepEqual(readContextRefusal(newVllm), { limit: 4096, prompt: 252 });
  assert.deepEqual(readContextRefusal(promptOnly), { limit: 4096, prompt: 5000 });
  assert.deepEqual(readContextRefusal(kit), { limit: 2048, prompt: 252 });
  assert.deepEqual(readContextRefusal(kitPrompt), { limit: 2048, prompt: 2100 });
  assert.deepEqual(readContextRefusal("too long"), { limit: null, prompt: null });
  for (const t of [oldVllm, newVllm, kit, kitPrompt]) assert.ok(isContextRefusal(400, t));
  assert.ok(!isContextRefusal(400, "temperature must be >= 0"));
  assert.ok(!isContextRefusal(500, oldVllm));
  assert.equal(serverRoot("http://h:8000/v1"), "http://h:8000");
  assert.equal(serverRoot("http://h/proxy/v1"), "http://h/proxy");
});

/**
 * A server shaped like vLLM: GET /v1/models reports max_model_len, POST /tokenize counts a prompt (when
 * `tokenize` is on), and a chat request whose prompt + max_tokens passes the window is refused with vLLM's
 * message. A prompt's length is its characters here.
 */
async function windowServer(limit: number, opts: { tokenize: boolean; listWindow: boolean }) {
  const sent: Array<{ path: string; body: Record<string, unknown> }> = [];
  const promptOf = (b: Record<string, unknown>) => JSON.stringify(b.messages).length;
  const server = createServer((req: IncomingMessage, res: ServerResponse) => {
    let raw = "";
    req.on("data", (c) => (raw += c));
    req.on("end", () => {
      const body = raw ? (JSON.parse(raw) as Record<string, unknown>) : {};
      sent.push({ path: `${req.method} ${req.url}`, body });
      const reply = (status: number, json: unknown) => res.writeHead(status, { "content-type": "application/json" }).end(JSON.stringify(json));
      if (req.url === "/v1/models") return reply(200, { object: "list", data: [{ id: "m", object: "model", ...(opts.listWindow ? { max_model_len: limit } : {}) }] });
      if (req.url === "/tokenize" && opts.tokenize) return reply(200, { count: promptOf(body), max_model_len: limit, tokens: [] });
      if (req.url !== "/v1/chat/completions") return reply(404, { error: { message: "not found" } });
      const prompt = promptOf(body);
      const max = Number(body.max_tokens ?? limit - prompt);
      if (prompt + max > limit) {
        const message = prompt >= limit
          ? `This model's maximum context length is ${limit} tokens. However, your request has ${prompt} input tokens. Please reduce the length of the input messages.`
          : `'max_tokens' or 'max_completion_tokens' is too large: ${max}. This model's maximum context length is ${limit} tokens and your request has ${prompt} input tokens (${max} > ${limit} - ${prompt}).`;
        return reply(400, { error: { message, type: "BadRequestError", code: 400 } });
      }
      return reply(200, { choices: [{ message: { content: "SELECT 1" }, finish_reason: "stop" }], usage: { prompt_tokens: prompt, completion_tokens: 1 } });
    });
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  const base = `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1`;
  return { base, sent, close: () => new Promise<void>((r) => server.close(() => r())) };
}

const question = [{ role: "user" as const, content: "How many orders were placed in 2024?" }];
const promptLength = JSON.stringify(question).length;
const chats = (sent: Array<{ path: string; body: Record<string, unknown> }>) => sent.filter((s) => s.path === "POST /v1/chat/completions");

test("a reported window and a tokenize route: max_tokens is cut to the room after the prompt before sending", async () => {
  const s = await windowServer(512, { tokenize: true, listWindow: true });
  const p = new OpenAIPolicy("m", s.base);
  try {
    const [c] = await p.complete(question, { max_tokens: 2048 });
    assert.equal(c.text, "SELECT 1");
    assert.equal(p.contextWindow(), 512);
    assert.deepEqual(chats(s.sent).map((x) => x.body.max_tokens), [512 - promptLength]);
    // a budget that fits whatever the prompt goes as asked, with no extra round trip
    s.sent.length = 0;
    await p.complete(question, { max_tokens: 16 });
    assert.deepEqual(s.sent.map((x) => x.path), ["POST /v1/chat/completions"]);
    assert.equal(s.sent[0].body.max_tokens, 16);
  } finally {
    await p.close();
    await s.close();
  }
});

test("no reported window, no tokenize route: a refusal is sized from what it says and sent once more", async () => {
  const s = await windowServer(512, { tokenize: false, listWindow: false });
  const p = new OpenAIPolicy("m", s.base);
  try {
    const [c] = await p.complete(question, { max_tokens: 2048 });
    assert.equal(c.text, "SELECT 1");
    assert.deepEqual(chats(s.sent).map((x) => x.body.max_tokens), [2048, 512 - promptLength]);
    assert.equal(p.contextWindow(), 512);
  } finally {
    await p.close();
    await s.close();
  }
});

test("a prompt that fills the window alone is a setup error, whichever way its length is learnt", async () => {
  const long = [{ role: "user" as const, content: "x".repeat(600) }];
  for (const shape of [{ tokenize: true, listWindow: true }, { tokenize: false, listWindow: false }]) {
    const s = await windowServer(512, shape);
    const p = new OpenAIPolicy("m", s.base, { retries: 0 });
    try {
      // a budget as large as the window is counted first; a smaller one is sent and refused
      await assert.rejects(p.complete(long, { max_tokens: shape.tokenize ? 2048 : 64 }), (e: unknown) =>
        e instanceof PolicyError && e.setup && !e.fatal && e.reason === "context_exceeded" && /the prompt has 6\d\d tokens and m at .* takes 512/.test(e.message));
      // sized beforehand, nothing is sent at all; learnt from a refusal, it is not sent twice
      assert.equal(chats(s.sent).length, shape.tokenize ? 0 : 1);
    } finally {
      await p.close();
      await s.close();
    }
  }
});

test("in process, a prompt that fills the model's window is the same setup error, not a crash of the run", async () => {
  const { loadModel } = await import("../../lib/model/load.js");
  const { ChatEngine } = await import("../../lib/model/chat.js");
  const { chatPolicy } = await import("../../lib/policy/tfjs.js");
  const { fixtureDir } = await import("../model/fixtures.js");
  const model = await loadModel(fixtureDir("qwen2"), { backend: "cpu", name: "tiny", contextLength: 24 });
  try {
    const policy = chatPolicy(new ChatEngine(model), { name: "tfjs:tiny", model: "tiny", adapter: null });
    await assert.rejects(policy.complete([{ role: "user", content: "a question far longer than twenty-four tokens of context can hold at all" }], { max_tokens: 8 }), (e: unknown) =>
      e instanceof PolicyError && e.setup && !e.fatal && e.reason === "context_exceeded");
  } finally {
    model.dispose();
  }
});
