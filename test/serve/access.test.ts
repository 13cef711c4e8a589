// Who may reach `t2s serve` (issue 33's access gaps, issue 34's starvation items): the API key, JSON-only
// bodies, runtime adapter routes only when enabled and only for sane paths up to a cap, a connection cap
// that keeps the server reachable past thousands of idle sockets, and a graceful shutdown.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { connect, type Socket } from "node:net";
import { writeFileSync, cpSync } from "node:fs";
import { join } from "node:path";
import OpenAI from "openai";
import { loadModel } from "../../lib/model/load.js";
import type { CausalLM } from "../../lib/model/model.js";
import { startServer, type RunningServer } from "../../lib/serve/server.js";
import { isLoopback } from "../../lib/serve/access.js";
import { runtimeLoraFromEnv } from "../../lib/serve/adapters.js";
import { fixtureDir } from "../model/fixtures.js";
import { HANG_GUARD_MS, scratchDir } from "../helpers.js";

let model: CausalLM;

before(async () => {
  model = await loadModel(fixtureDir("qwen2"), { backend: "cpu", name: "tiny", contextLength: 512 });
});

after(() => model.dispose());

const MSGS = [{ role: "user", content: "How many orders?" }];

function post(url: string, body: unknown, headers: Record<string, string> = { "content-type": "application/json" }): Promise<Response> {
  return fetch(url, { method: "POST", headers, body: typeof body === "string" ? body : JSON.stringify(body) });
}

test("--api-key: every route but /health needs the Bearer key (/metrics too); the official client sends it", async () => {
  const server = await startServer({ model, port: 0, apiKey: "s3cret" });
  try {
    assert.equal((await fetch(`${server.url}/health`)).status, 200);
    assert.equal((await fetch(`${server.url}/metrics`)).status, 401);
    assert.equal((await fetch(`${server.url}/metrics`, { headers: { authorization: "Bearer s3cret" } })).status, 200);
    for (const [path, auth] of [["/v1/models", undefined], ["/v1/models", "Bearer wrong"], ["/v1/models", "s3cret"]] as const) {
      const r = await fetch(`${server.url}${path}`, { headers: auth ? { authorization: auth } : {} });
      assert.equal(r.status, 401, `${path} ${auth}`);
      assert.equal(((await r.json()) as { error: { code: string } }).error.code, "invalid_api_key");
    }
    const anon = await post(`${server.url}/v1/chat/completions`, { model: "tiny", messages: MSGS, max_tokens: 1 });
    assert.equal(anon.status, 401);
    assert.equal((await post(`${server.url}/tokenize`, { model: "tiny", prompt: "x" })).status, 401);
    const good = new OpenAI({ baseURL: `${server.url}/v1`, apiKey: "s3cret", maxRetries: 0 });
    const r = await good.chat.completions.create({ model: "tiny", messages: MSGS as never, max_tokens: 2 });
    assert.equal(r.object, "chat.completion");
    const bad = new OpenAI({ baseURL: `${server.url}/v1`, apiKey: "nope", maxRetries: 0 });
    await assert.rejects(bad.models.list(), (e: { status?: number }) => e.status === 401);
  } finally {
    await server.close();
  }
  // vLLM's variable sets the key too
  process.env.VLLM_API_KEY = "fromenv";
  const viaEnv = await startServer({ model, port: 0 });
  delete process.env.VLLM_API_KEY;
  try {
    assert.equal((await fetch(`${viaEnv.url}/v1/models`)).status, 401);
    assert.equal((await fetch(`${viaEnv.url}/v1/models`, { headers: { authorization: "Bearer fromenv" } })).status, 200);
  } finally {
    await viaEnv.close();
  }
});

test("a non-loopback host without a key is warned about", async () => {
  assert.ok(isLoopback("127.0.0.1") && isLoopback("localhost") && isLoopback("::1") && isLoopback("127.3.2.1"));
  assert.ok(!isLoopback("0.0.0.0") && !isLoopback("::") && !isLoopback("10.1.2.3"));
  const warnings: string[] = [];
  const open = await startServer({ model, port: 0, host: "0.0.0.0", warn: (l) => warnings.push(l) });
  await open.close();
  assert.equal(warnings.length, 1);
  assert.match(warnings[0], /without an API key/);
  const keyed = await startServer({ model, port: 0, host: "0.0.0.0", apiKey: "k", warn: (l) => warnings.push(l) });
  await keyed.close();
  const local = await startServer({ model, port: 0, warn: (l) => warnings.push(l) });
  await local.close();
  assert.equal(warnings.length, 1);
});

test("bodies are read as JSON only under a JSON content type: a text/plain or form post is a 415", async () => {
  const server = await startServer({ model, port: 0, allowRuntimeLora: true });
  try {
    const body = JSON.stringify({ lora_name: "x", lora_path: fixtureDir("qwen2-lora") });
    for (const type of ["text/plain", "text/plain;charset=UTF-8", "application/x-www-form-urlencoded", "multipart/form-data; boundary=x"]) {
      const r = await post(`${server.url}/v1/load_lora_adapter`, body, { "content-type": type });
      assert.equal(r.status, 415, type);
      assert.equal(((await r.json()) as { error: { code: string } }).error.code, "unsupported_media_type");
    }
    assert.equal(server.engine.models.has("x"), false, "nothing was loaded");
    const chat = await post(`${server.url}/v1/chat/completions`, { model: "tiny", messages: MSGS, max_tokens: 1 }, { "content-type": "text/plain" });
    assert.equal(chat.status, 415);
    const ok = await post(`${server.url}/v1/chat/completions`, { model: "tiny", messages: MSGS, max_tokens: 1 }, { "content-type": "application/json; charset=utf-8" });
    assert.equal(ok.status, 200);
  } finally {
    await server.close();
  }
});

test("runtime adapter routes exist only when enabled (flag or VLLM_ALLOW_RUNTIME_LORA_UPDATING)", async () => {
  assert.equal(runtimeLoraFromEnv({ VLLM_ALLOW_RUNTIME_LORA_UPDATING: "True" }), true);
  assert.equal(runtimeLoraFromEnv({ VLLM_ALLOW_RUNTIME_LORA_UPDATING: "0" }), false);
  assert.equal(runtimeLoraFromEnv({}), false);
  const off = await startServer({ model, port: 0 });
  try {
    const r = await post(`${off.url}/v1/load_lora_adapter`, { lora_name: "x", lora_path: fixtureDir("qwen2-lora") });
    assert.equal(r.status, 404);
    assert.equal((await post(`${off.url}/v1/unload_lora_adapter`, { lora_name: "x" })).status, 404);
  } finally {
    await off.close();
  }
  process.env.VLLM_ALLOW_RUNTIME_LORA_UPDATING = "1";
  const on = await startServer({ model, port: 0 });
  delete process.env.VLLM_ALLOW_RUNTIME_LORA_UPDATING;
  try {
    assert.equal((await post(`${on.url}/v1/load_lora_adapter`, { lora_name: "x", lora_path: fixtureDir("qwen2-lora") })).status, 200);
  } finally {
    await on.close();
  }
});

test("load_lora_adapter takes only adapter folders (under --lora-root when given), at most --max-loras, and never shows server paths", async () => {
  const root = scratchDir("t2s-loras-");
  cpSync(fixtureDir("qwen2-lora"), join(root, "a"), { recursive: true });
  cpSync(fixtureDir("qwen2-lora"), join(root, "b"), { recursive: true });
  writeFileSync(join(root, "file.txt"), "not a folder");
  const server = await startServer({ model, port: 0, allowRuntimeLora: true, maxLoras: 1, loraRoots: [root] });
  const load = async (name: string, path: string) => {
    const r = await post(`${server.url}/v1/load_lora_adapter`, { lora_name: name, lora_path: path });
    return { status: r.status, text: await r.text() };
  };
  try {
    // under --lora-root a missing path, a file and a folder elsewhere all get the same message (adapter-attacks.test.ts)
    for (const [path, why] of [[join(root, "file.txt"), /is not an adapter folder under the server's adapter folders/], [root, /no adapter_config\.json/], [fixtureDir("qwen2-lora"), /is not an adapter folder under the server's adapter folders/], [join(root, "a", "..", "..", "etc"), /is not an adapter folder under/], ["/etc\u0000x", /plain folder path/], [join(root, "missing"), /is not an adapter folder under/]] as const) {
      const r = await load("x", path);
      assert.equal(r.status, 400, path);
      assert.match(r.text, why, path);
    }
    assert.equal((await load("../evil", join(root, "a"))).status, 400, "adapter names are plain");
    assert.equal((await load("a", join(root, "a"))).status, 200);
    const over = await load("b", join(root, "b"));
    assert.equal(over.status, 400);
    assert.match(over.text, /at most 1 adapters/);
    // a broken adapter's error names the path as given, not the resolved one
    writeFileSync(join(root, "b", "adapter_config.json"), "{not json");
    assert.equal((await post(`${server.url}/v1/unload_lora_adapter`, { lora_name: "a" })).status, 200);
    const broken = await load("b", join(root, "b"));
    assert.equal(broken.status, 400);
  } finally {
    await server.close();
  }
});

test("thousands of idle sockets cannot make the server unreachable: past the cap, idle ones are closed first", async () => {
  const server = await startServer({ model, port: 0, connections: { maxConnections: 64, headersMs: 5_000 } });
  const { port } = new URL(server.url);
  const sockets: Socket[] = [];
  try {
    // bounded: 1,500 sockets to loopback, opened in batches
    for (let b = 0; b < 15; b++) {
      await Promise.all(Array.from({ length: 100 }, () => new Promise<void>((resolve) => {
        const s = connect(Number(port), "127.0.0.1", () => resolve());
        s.on("error", () => resolve());
        s.on("close", () => resolve());
        sockets.push(s);
      })));
    }
    const health = await fetch(`${server.url}/health`);
    assert.equal(health.status, 200);
    const r = await post(`${server.url}/v1/chat/completions`, { model: "tiny", messages: MSGS, max_tokens: 2 });
    assert.equal(r.status, 200);
    // the closes the server sent reach the client sockets as events: wait for them, not for a fixed time
    const stillOpen = () => sockets.filter((s) => !s.destroyed && s.readyState === "open").length;
    const until = Date.now() + HANG_GUARD_MS;
    while (stillOpen() > 64 && Date.now() < until) await new Promise((r) => setTimeout(r, 20));
    assert.ok(stillOpen() <= 64, `${stillOpen()} idle sockets still open past the cap of 64`);
  } finally {
    for (const s of sockets) s.destroy();
    await server.close();
  }
});

test("graceful shutdown: new requests get 503, a short request finishes, a long stream is cut with an error event and [DONE]", async () => {
  // Two servers, so that nothing depends on how fast this machine generates: the first drains with a grace
  // far longer than a 3-token request; the second is closed with no grace while a stream is running.
  const draining = await startServer({ model, port: 0 });
  const short = post(`${draining.url}/v1/chat/completions`, { model: "tiny", messages: MSGS, max_tokens: 3, ignore_eos: true });
  const until = Date.now() + HANG_GUARD_MS;
  while (draining.inFlight() < 1 && Date.now() < until) await new Promise((r) => setTimeout(r, 10));
  const closing = draining.close(HANG_GUARD_MS);
  // close() starts draining at once: the next request is refused
  const late = await post(`${draining.url}/v1/chat/completions`, { model: "tiny", messages: MSGS, max_tokens: 3 }).catch(() => null);
  if (late) assert.equal(late.status, 503);
  const shortRes = await short;
  assert.equal(shortRes.status, 200);
  assert.equal(((await shortRes.json()) as { choices: { finish_reason: string }[] }).choices[0].finish_reason, "length");
  await closing;

  const cutting = await startServer({ model, port: 0 });
  const res = await post(`${cutting.url}/v1/chat/completions`, { model: "tiny", messages: MSGS, max_tokens: 400, ignore_eos: true, stream: true });
  const reader = res.body!.getReader();
  const decoder = new TextDecoder();
  let text = "";
  const first = await reader.read(); // the stream is running
  text += decoder.decode(first.value, { stream: true });
  const cut = cutting.close(0);
  for (let r = await reader.read(); !r.done; r = await reader.read()) text += decoder.decode(r.value, { stream: true });
  await cut;
  const events = text.trim().split("\n\n");
  assert.equal(events.at(-1), "data: [DONE]");
  assert.match(events.at(-2)!, /"error"/);
  assert.match(events.at(-2)!, /stopping/);
});

