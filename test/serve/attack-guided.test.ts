// Guided decoding under attack (issue 46, items 5-7): hostile schemas are refused with a 400 that names
// the limit or the reference at fault, grammar work never stops /health (a poller runs throughout), and
// after every hostile schema a normal guided request on the same server still gets a schema-valid answer.
import { test } from "node:test";
import assert from "node:assert/strict";
import { startServer, type RunningServer } from "../../lib/serve/server.js";
import { kitPath } from "../../lib/core/paths.js";
import { HealthPoller, postJson, validates } from "./attack-helpers.js";
import { spawn } from "node:child_process";
import { once } from "node:events";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { fixtureDir } from "../model/fixtures.js";
import { scratchDir } from "../helpers.js";

/** The model folder each server loads in its engine thread (the /health figures are the worker path's). */
const LOAD = { dir: kitPath("data", "models", "shop-sql-4m"), backend: "cpu", name: "shop" };

let fresh = 0;

/** A small schema never sent before (a new property name), so its grammar is compiled anew. */
function freshSchema(): Record<string, unknown> {
  const name = `answer_${fresh++}`;
  return { type: "object", properties: { [name]: { type: "string" }, count: { type: "integer" } }, required: [name, "count"], additionalProperties: false };
}

function guided(server: RunningServer, schema: unknown, extra: Record<string, unknown> = {}): Promise<Response> {
  return postJson(`${server.url}/v1/chat/completions`, { model: "shop", messages: [{ role: "user", content: "How many orders were shipped?" }], response_format: { type: "json_schema", json_schema: { name: "answer", schema } }, max_tokens: 48, temperature: 1, seed: 5, ...extra });
}

/** A normal guided request with a schema compiled for it now: 200 and content that validates. */
async function stillServesGuided(server: RunningServer): Promise<void> {
  const schema = freshSchema();
  const res = await guided(server, schema);
  const body = (await res.json()) as { choices: { message: { content: string } }[] };
  assert.equal(res.status, 200, JSON.stringify(body));
  const content = body.choices[0].message.content;
  assert.ok(validates(JSON.parse(content), schema), content);
}

/** A schema `depth` objects deep. */
function nested(depth: number): unknown {
  let s: unknown = { type: "string" };
  for (let i = 0; i < depth; i++) s = { type: "object", properties: { a: s }, required: ["a"] };
  return s;
}

async function errorOf(res: Response): Promise<{ message: string; code: string | null; param: string | null }> {
  return ((await res.json()) as { error: { message: string; code: string | null; param: string | null } }).error;
}

test("5. a schema nested 55 objects deep is a 400 naming --guided-max-depth; a normal guided request still gets a valid answer", async () => {
  const server = await startServer({ load: LOAD, port: 0 });
  let failures: string[] = [];
  const poller = new HealthPoller(server.url);
  try {
    const res = await guided(server, nested(55));
    assert.equal(res.status, 400);
    const err = await errorOf(res);
    assert.equal(err.code, "guided_limit");
    assert.match(err.message, /more than 32 levels deep/);
    assert.match(err.message, /--guided-max-depth/);
    await stillServesGuided(server);
    // a deep $ref chain counts its hops
    const defs: Record<string, unknown> = {};
    for (let i = 0; i < 40; i++) defs[`d${i}`] = { type: "object", properties: { a: { $ref: `#/$defs/d${i + 1}` } }, required: ["a"] };
    defs.d40 = { type: "string" };
    const chain = await guided(server, { $defs: defs, $ref: "#/$defs/d0" });
    assert.equal(chain.status, 400);
    assert.equal((await errorOf(chain)).code, "guided_limit");
    await stillServesGuided(server);
  } finally {
    failures = await poller.stop();
    await server.close();
  }
  assert.deepEqual(failures, [], "/health failed while attacked");
});

test("5. past a raised depth limit the grammar engine's crash costs only that request: its instance is replaced", async () => {
  const server = await startServer({ load: LOAD, port: 0, guidedLimits: { maxDepth: 256 } });
  let failures: string[] = [];
  const poller = new HealthPoller(server.url);
  try {
    await stillServesGuided(server);
    for (const depth of [55, 80]) {
      const res = await guided(server, nested(depth));
      assert.equal(res.status, 400);
      const err = await errorOf(res);
      assert.equal(err.param, "response_format");
      assert.match(err.message, /the grammar engine failed on it/);
      await stillServesGuided(server);
    }
  } finally {
    failures = await poller.stop();
    await server.close();
  }
  assert.deepEqual(failures, [], "/health failed while attacked");
});

test("6. a self-referencing or dangling $ref is a 400 before any sampling, and nothing is printed", async () => {
  const server = await startServer({ load: LOAD, port: 0 });
  let failures: string[] = [];
  const poller = new HealthPoller(server.url);
  const printed: string[] = [];
  const write = process.stderr.write.bind(process.stderr);
  process.stderr.write = ((chunk: string | Uint8Array, ...rest: unknown[]) => {
    printed.push(String(chunk));
    return (write as (...a: unknown[]) => boolean)(chunk, ...rest);
  }) as typeof process.stderr.write;
  try {
    const selfRef = await guided(server, { $defs: { n: { $ref: "#/$defs/n" } }, $ref: "#/$defs/n" });
    assert.equal(selfRef.status, 400);
    assert.match((await errorOf(selfRef)).message, /recursive reference/);
    // recursion through a property is refused too: no document of it is finite when the property is required
    const tree = await guided(server, { $defs: { node: { type: "object", properties: { next: { $ref: "#/$defs/node" } }, required: ["next"] } }, $ref: "#/$defs/node" });
    assert.equal(tree.status, 400);
    await stillServesGuided(server);
    const dangling = await guided(server, { type: "object", properties: { a: { $ref: "#/$defs/missing" } } });
    assert.equal(dangling.status, 400);
    assert.match((await errorOf(dangling)).message, /dangling reference/);
    const remote = await guided(server, { $ref: "http://127.0.0.1:1/schema.json" });
    assert.equal(remote.status, 400);
    await stillServesGuided(server);
    // the same refusals on the completions route and for a forced tool call
    const cmpl = await postJson(`${server.url}/v1/completions`, { model: "shop", prompt: "x", max_tokens: 8, guided_json: { $defs: { n: { $ref: "#/$defs/n" } }, $ref: "#/$defs/n" } });
    assert.equal(cmpl.status, 400);
    const tool = await postJson(`${server.url}/v1/chat/completions`, { model: "shop", messages: [{ role: "user", content: "x" }], tools: [{ type: "function", function: { name: "f", parameters: { type: "object", properties: { a: { $ref: "#/nowhere" } } } } }], tool_choice: "required", max_tokens: 8 });
    assert.equal(tool.status, 400);
    assert.equal((await errorOf(tool)).param, "tools");
  } finally {
    process.stderr.write = write;
    failures = await poller.stop();
    await server.close();
  }
  assert.deepEqual(failures, [], "/health failed while attacked");
  assert.deepEqual(printed.filter((l) => /FATAL|Aborted/.test(l)), []);
});

/** A schema of `n` string properties (20,000 of them is 718 KB). */
function wide(n: number, prefix = "property_number_"): Record<string, unknown> {
  const properties: Record<string, unknown> = {};
  for (let i = 0; i < n; i++) properties[`${prefix}${i}`] = { type: "string", description: "a field of a very wide object" };
  return { type: "object", properties };
}

test("7. a 20,000-property schema is a 400 naming --guided-max-schema-bytes, refused before it is compiled", async () => {
  const server = await startServer({ load: LOAD, port: 0 });
  let failures: string[] = [];
  const poller = new HealthPoller(server.url);
  try {
    const schema = wide(20_000);
    assert.ok(JSON.stringify(schema).length > 700_000);
    const res = await guided(server, schema);
    assert.equal(res.status, 400);
    const err = await errorOf(res);
    assert.equal(err.code, "guided_limit");
    assert.match(err.message, /--guided-max-schema-bytes/);
    await stillServesGuided(server);
  } finally {
    failures = await poller.stop();
    await server.close();
  }
  assert.deepEqual(failures, [], "/health failed while attacked");
});

test("7. a compile past --guided-compile-timeout is a 400 naming it; /health answers while it runs, every variant pays only its own time", async () => {
  // the mechanism under test is the timeout itself: an explicit limit far below what this schema takes
  const server = await startServer({ load: LOAD, port: 0, guidedLimits: { maxSchemaBytes: 4 * 1024 * 1024, compileTimeoutMs: 2000 } });
  let failures: string[] = [];
  const poller = new HealthPoller(server.url);
  try {
    await stillServesGuided(server);
    for (const prefix of ["p_", "q_"]) {
      const start = performance.now();
      const res = await guided(server, wide(20_000, prefix));
      const end = performance.now();
      assert.equal(res.status, 400);
      const err = await errorOf(res);
      assert.equal(err.code, "guided_limit");
      assert.match(err.message, /did not compile within 2000 ms/);
      assert.match(err.message, /--guided-compile-timeout/);
      // /health was answered (twice at least) while the grammar compiled
      assert.ok(poller.within(start, end) >= 2, `${poller.within(start, end)} /health answers while the schema compiled`);
      await stillServesGuided(server);
    }
    // the same schema again is refused from the cache, without another compile
    const again = await guided(server, wide(20_000, "p_"));
    assert.equal(again.status, 400);
  } finally {
    failures = await poller.stop();
    await server.close();
  }
  assert.deepEqual(failures, [], "/health failed while attacked");
});

test("a server that compiled a guided grammar leaves nothing running after close(): its process exits by itself (engine in its thread or in this one)", async () => {
  // the grammar threads outlive the server (they are kept per tokenizer) but, idle, must not hold the
  // process; the script reports what still keeps its event loop alive, and exits only if something does
  const lib = (p: string) => JSON.stringify(join(process.cwd(), p));
  const script = (engineThread: string) => `const ENGINE_THREAD = ${JSON.stringify(engineThread)};
import { loadModel } from ${lib("lib/model/load.ts")};
import { startServer } from ${lib("lib/serve/server.ts")};
const model = await loadModel(${JSON.stringify(fixtureDir("qwen2"))}, { backend: "cpu", name: "tiny", contextLength: 2048 });
const server = await startServer(ENGINE_THREAD === "worker" ? { load: { dir: ${JSON.stringify(fixtureDir("qwen2"))}, backend: "cpu", name: "tiny", contextLength: 2048 }, port: 0 } : { model, port: 0 });
const tools = [{ type: "function", function: { name: "run_sql", parameters: { type: "object", properties: { query: { type: "string" } } } } }];
const res = await fetch(server.url + "/v1/chat/completions", { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ model: "tiny", messages: [{ role: "user", content: "x" }], tools, tool_choice: "required", max_tokens: 8 }) });
console.log("status " + res.status);
await res.arrayBuffer();
await server.close();
model.dispose();
setImmediate(() => {
  // its own stdout and stderr (pipes to the test) are listed too, and never hold it
  const left = process.getActiveResourcesInfo().filter((r) => r !== "PipeWrap");
  console.log("left " + JSON.stringify(left));
  if (left.length) process.exit(3);
});`;
  for (const engineThread of ["worker", "main"]) {
    const file = join(scratchDir(), "close-guided.mts");
    writeFileSync(file, script(engineThread));
    const child = spawn(process.execPath, ["--import", "tsx", file], { stdio: ["ignore", "pipe", "pipe"] });
    let out = "";
    let err = "";
    child.stdout!.on("data", (d) => (out += d));
    child.stderr!.on("data", (d) => (err += d));
    const [code] = await once(child, "close");
    assert.match(out, /status 200/, `${engineThread}: ${err}`);
    assert.match(out, /left \[\]/, `${engineThread}: ${err}`);
    assert.equal(code, 0, `${engineThread}: ${err}`);
  }
});
