// Guided decoding (issue 33): with tool_choice required or named, or response_format json_schema, every
// reply parses and validates against its schema, on the kit's model, a random-weight model and the tiny
// fixture; and logprobs are the model's raw ones by default, equal at T = 0.5 and T = 2.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { loadModel } from "../../lib/model/load.js";
import { loadTokenizer } from "../../lib/model/tokenizer.js";
import { randomModel, tinyConfig } from "../../lib/model/random-model.js";
import type { CausalLM } from "../../lib/model/model.js";
import { startServer, type RunningServer } from "../../lib/serve/server.js";
import { kitPath } from "../../lib/core/paths.js";
import { fixtureDir } from "../model/fixtures.js";
import { validates } from "./attack-helpers.js";


const SQL = { type: "object", properties: { sql: { type: "string" }, limit: { type: "integer" }, mode: { enum: ["ro", "rw"] } }, required: ["sql", "limit", "mode"], additionalProperties: false };
const LOOKUP = { type: "object", properties: { key: { type: "string" }, ok: { type: "boolean" }, xs: { type: "array", items: { type: "number" } } }, required: ["key", "ok"], additionalProperties: false };
const TOOLS = [
  { type: "function", function: { name: "execute_sql", description: "run a query", parameters: SQL } },
  { type: "function", function: { name: "lookup", description: "look a key up", parameters: LOOKUP } },
];
const SCHEMAS: Record<string, unknown> = { execute_sql: SQL, lookup: LOOKUP };

async function chat(server: RunningServer, name: string, body: Record<string, unknown>): Promise<any> {
  const res = await fetch(`${server.url}/v1/chat/completions`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ model: name, messages: [{ role: "user", content: "How many orders were shipped?" }], ...body }) });
  const json = await res.json();
  assert.equal(res.status, 200, JSON.stringify(json));
  return json;
}

/** n calls of each forced mode and response_format json_schema: all parse and validate. */
async function allValid(server: RunningServer, name: string, n: number, maxTokens: number): Promise<void> {
  for (const tool_choice of ["required", { type: "function", function: { name: "execute_sql" } }, { type: "function", function: { name: "lookup" } }]) {
    const r = await chat(server, name, { tools: TOOLS, tool_choice, n, max_tokens: maxTokens, temperature: 1, seed: 11 });
    assert.equal(r.choices.length, n);
    for (const c of r.choices) {
      assert.equal(c.finish_reason, "tool_calls", JSON.stringify(c));
      assert.equal(c.message.tool_calls.length, 1);
      const call = c.message.tool_calls[0].function;
      if (typeof tool_choice === "object") assert.equal(call.name, tool_choice.function.name);
      assert.ok(call.name in SCHEMAS, `the call names ${call.name}, which was not offered`);
      const args = JSON.parse(call.arguments);
      assert.ok(validates(args, SCHEMAS[call.name]), `${call.name}(${call.arguments}) does not validate`);
    }
  }
  const r = await chat(server, name, { response_format: { type: "json_schema", json_schema: { name: "lookup", schema: LOOKUP } }, n, max_tokens: maxTokens, temperature: 1, seed: 12 });
  for (const c of r.choices) {
    assert.equal(c.finish_reason, "stop", JSON.stringify(c));
    assert.ok(validates(JSON.parse(c.message.content), LOOKUP), c.message.content);
  }
  const j = await chat(server, name, { response_format: { type: "json_object" }, n: 2, max_tokens: maxTokens, temperature: 1, seed: 13 });
  for (const c of j.choices) if (c.finish_reason === "stop") assert.equal(typeof JSON.parse(c.message.content), "object");
}

let tiny: CausalLM;
let tinyServer: RunningServer;

before(async () => {
  // wasm, not the plain-JS cpu backend: the same engine and masks, several times less CPU time
  tiny = await loadModel(fixtureDir("qwen2"), { backend: "wasm", name: "tiny", contextLength: 2048 });
  tinyServer = await startServer({ model: tiny, port: 0 });
});

after(async () => {
  await tinyServer.close();
  tiny.dispose();
});

test("guided tool calls and response_format on the tiny fixture: 100% parse and validate, streaming too", async () => {
  await allValid(tinyServer, "tiny", 8, 200);
  const res = await fetch(`${tinyServer.url}/v1/chat/completions`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ model: "tiny", messages: [{ role: "user", content: "go" }], tools: TOOLS, tool_choice: "required", max_tokens: 200, stream: true, seed: 4 }) });
  let args = "";
  let name = "";
  let finish = "";
  for (const ev of (await res.text()).split("\n\n")) {
    if (!ev.startsWith("data: {")) continue;
    const chunk = JSON.parse(ev.slice(6));
    for (const c of chunk.choices) {
      name += c.delta.tool_calls?.[0]?.function?.name ?? "";
      args += c.delta.tool_calls?.[0]?.function?.arguments ?? "";
      finish = c.finish_reason ?? finish;
    }
  }
  assert.equal(finish, "tool_calls");
  assert.ok(validates(JSON.parse(args), SCHEMAS[name]), `${name}(${args})`);
});

test("a schema the grammar engine cannot use, and tool parameters that are no schema, are 400s", async () => {
  const post = (body: unknown) => fetch(`${tinyServer.url}/v1/chat/completions`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(body) });
  const notSchema = await post({ model: "tiny", messages: [{ role: "user", content: "x" }], tools: [{ type: "function", function: { name: "f", parameters: "notaschema" } }], tool_choice: "required" });
  assert.equal(notSchema.status, 400);
  const badType = await post({ model: "tiny", messages: [{ role: "user", content: "x" }], response_format: { type: "json_schema", json_schema: { name: "x", schema: { type: "object", properties: { a: { type: "nonsense" } }, required: ["a"] } } } });
  assert.equal(badType.status, 400, await badType.text());
});

test("raw logprobs by default: equal at T = 0.5 and T = 2 for the same tokens; processed_logprobs depend on T", async () => {
  const lp = async (server: RunningServer, temperature: number) => {
    const r = await chat(server, "tiny", { max_tokens: 6, temperature, top_k: 1, seed: 1, logprobs: true, ignore_eos: true });
    return r.choices[0].logprobs.content.map((t: { token: string; logprob: number }) => [t.token, t.logprob]);
  };
  const [a, b] = [await lp(tinyServer, 0.5), await lp(tinyServer, 2)];
  assert.deepEqual(a.map((x: unknown[]) => x[0]), b.map((x: unknown[]) => x[0]), "top_k 1 takes the same tokens");
  a.forEach((x: number[], i: number) => assert.ok(Math.abs(x[1] - b[i][1]) < 1e-5, `token ${i}: ${x[1]} vs ${b[i][1]}`));
  const processed = await startServer({ model: tiny, port: 0, logprobsMode: "processed_logprobs" });
  try {
    const [p, q] = [await lp(processed, 0.5), await lp(processed, 2)];
    assert.ok(p.some((x: number[], i: number) => Math.abs(x[1] - q[i][1]) > 1e-3), "processed logprobs follow the temperature");
  } finally {
    await processed.close();
  }
});

test("guided tool calls on a random-weight model: 100% parse and validate", async () => {
  const tok = loadTokenizer(kitPath("data", "models", "shop-sql-4m"));
  const model = randomModel(tinyConfig({ vocabSize: 4096, eosTokenIds: tok.eosIds }), { name: "random", tokenizer: tok, seed: 5 });
  const server = await startServer({ model, port: 0 });
  try {
    await allValid(server, "random", 4, 120);
  } finally {
    await server.close();
    model.dispose();
  }
});

test("guided tool calls on the kit's model (shop-sql-4m): 100% parse and validate", async () => {
  const model = await loadModel(kitPath("data", "models", "shop-sql-4m"), { backend: "wasm", name: "shop" });
  const server = await startServer({ model, port: 0 });
  try {
    await allValid(server, "shop", 3, 120);
  } finally {
    await server.close();
    model.dispose();
  }
});

test("tool_choice auto with a strict tool: the reply is free text, served as before (the trigger is text, not the added tag token)", async () => {
  const strict = TOOLS.map((t) => ({ ...t, function: { ...t.function, strict: true } }));
  const r = await chat(tinyServer, "tiny", { tools: strict, n: 2, max_tokens: 40, temperature: 1, seed: 21 });
  for (const c of r.choices) assert.ok(["stop", "length", "tool_calls"].includes(c.finish_reason));
});
