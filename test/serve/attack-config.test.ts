// Configuration holes (issue 46, items 12-14), on both servers: an empty or blank API key is a usage error
// (exit 2), a keyless server answers only requests addressed to a loopback name (DNS rebinding), and with a
// key /health and /metrics tell nothing a key holder alone may know.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { request } from "node:http";
import { loadModel } from "../../lib/model/load.js";
import type { CausalLM } from "../../lib/model/model.js";
import { startServer } from "../../lib/serve/server.js";
import { ExecutorPool } from "../../lib/db/pool.js";
import { EnvService } from "../../lib/envserve/service.js";
import { startEnvServer } from "../../lib/envserve/server.js";
import { loadTasks } from "../../lib/tasks/loaders.js";
import { kitPath } from "../../lib/core/paths.js";
import { fixtureDir } from "../model/fixtures.js";
import { t2sBin } from "../helpers.js";
import { HealthPoller } from "./attack-helpers.js";

let model: CausalLM;

before(async () => {
  model = await loadModel(fixtureDir("qwen2"), { backend: "cpu", name: "tiny", contextLength: 512 });
});

after(() => model.dispose());

/**
 * Runs `t2s ...args` until it exits or prints its serving banner (then it is stopped): a server that starts
 * where it should have refused is seen by that order of events, without a timer.
 */
function exitOrServe(args: string[], env: Record<string, string> = {}): Promise<{ code: number | null; stderr: string; served: boolean }> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [t2sBin, ...args], { env: { ...process.env, ...env }, stdio: ["ignore", "pipe", "pipe"] });
    let stderr = "";
    let served = false;
    child.stderr.on("data", (d) => (stderr += d));
    child.stdout.on("data", (d) => {
      if (/^(serving |env service at )/m.test(String(d))) {
        served = true;
        child.kill("SIGKILL");
      }
    });
    child.on("error", reject);
    child.on("close", (code) => resolve({ code, stderr, served }));
  });
}

test("12. an empty or blank --api-key (or VLLM_API_KEY) is a usage error, before the model loads; env serve refuses the same", async () => {
  const modelDir = fixtureDir("qwen2");
  for (const [args, env] of [
    [["--api-key", ""], {}],
    [["--api-key", "   "], {}],
    [[], { VLLM_API_KEY: " \t" }],
  ] as const) {
    const r = await exitOrServe(["serve", "--model", modelDir, "--port", "0", "--backend", "cpu", ...args], env);
    assert.equal(r.served, false, `t2s serve ${args.join(" ")} started`);
    assert.equal(r.code, 2, r.stderr);
    assert.match(r.stderr, /^error \[usage\]: (--api-key|VLLM_API_KEY) is empty/m);
  }
  for (const env of [{ T2S_API_KEY: "  " }]) {
    const r = await exitOrServe(["env", "serve", "--port", "0", "--workers", "1"], env);
    assert.equal(r.served, false);
    assert.equal(r.code, 2, r.stderr);
  }
  // the library refuses it too
  await assert.rejects(startServer({ model, port: 0, apiKey: "" }), (e: { code?: string }) => e.code === "usage");
});

/** A request with a Host header of our choosing (fetch will not set one). */
function withHost(url: string, path: string, host: string, opts: { method?: string; body?: unknown; auth?: string } = {}): Promise<{ status: number; body: string }> {
  const u = new URL(url);
  const data = opts.body === undefined ? undefined : JSON.stringify(opts.body);
  return new Promise((resolve, reject) => {
    const req = request(
      { host: u.hostname, port: u.port, path, method: opts.method ?? "GET", headers: { host, ...(data ? { "content-type": "application/json", "content-length": Buffer.byteLength(data) } : {}), ...(opts.auth ? { authorization: opts.auth } : {}) } },
      (res) => {
        let body = "";
        res.on("data", (d) => (body += d));
        res.on("end", () => resolve({ status: res.statusCode ?? 0, body }));
      },
    );
    req.on("error", reject);
    req.end(data);
  });
}

test("13. without a key, t2s serve answers only requests addressed to a loopback name: DNS rebinding cannot load an adapter", async () => {
  const server = await startServer({ model, port: 0, allowRuntimeLora: true });
  let failures: string[] = [];
  const poller = new HealthPoller(server.url);
  const port = new URL(server.url).port;
  try {
    const load = { lora_name: "rebound", lora_path: fixtureDir("qwen2-lora") };
    const evil = await withHost(server.url, "/v1/load_lora_adapter", `evil.example:${port}`, { method: "POST", body: load });
    assert.equal(evil.status, 403);
    assert.equal(JSON.parse(evil.body).error.code, "host_not_allowed");
    assert.match(JSON.parse(evil.body).error.message, /--allowed-host evil\.example/);
    assert.equal((await withHost(server.url, "/v1/models", "evil.example")).status, 403);
    assert.equal((await withHost(server.url, "/health", "rebind.attacker.test:80")).status, 403);
    // the adapter was not loaded
    assert.ok(!JSON.parse((await withHost(server.url, "/v1/models", "localhost")).body).data.some((m: { id: string }) => m.id === "rebound"));
    for (const host of ["localhost", `localhost:${port}`, `127.0.0.1:${port}`, "[::1]:8000", "LOCALHOST", "127.0.0.1"]) {
      assert.equal((await withHost(server.url, "/v1/models", host)).status, 200, host);
    }
  } finally {
    failures = await poller.stop();
    await server.close();
  }
  assert.deepEqual(failures, [], "/health failed while attacked");
  // --allowed-host adds a name; "*" allows any; with a key the key is the guard and any Host is answered
  const named = await startServer({ model, port: 0, allowedHosts: ["lab.example"] });
  try {
    assert.equal((await withHost(named.url, "/v1/models", "lab.example:8000")).status, 200);
    assert.equal((await withHost(named.url, "/v1/models", "other.example")).status, 403);
  } finally {
    await named.close();
  }
  const any = await startServer({ model, port: 0, allowedHosts: ["*"] });
  try {
    assert.equal((await withHost(any.url, "/v1/models", "other.example")).status, 200);
  } finally {
    await any.close();
  }
  const keyed = await startServer({ model, port: 0, apiKey: "k3y" });
  try {
    assert.equal((await withHost(keyed.url, "/v1/models", "other.example", { auth: "Bearer k3y" })).status, 200);
    assert.equal((await withHost(keyed.url, "/v1/models", "other.example")).status, 401);
  } finally {
    await keyed.close();
  }
});

test("13. env serve without a key checks the Host the same way", async () => {
  const pool = new ExecutorPool({ workers: 1, startOnDemand: true });
  const service = new EnvService({ executor: pool, tasks: loadTasks(kitPath("data", "shop", "tasks.jsonl")).slice(0, 2) });
  const server = await startEnvServer({ service, port: 0 });
  try {
    const evil = await withHost(server.url, "/v1/tasks", "evil.example");
    assert.equal(evil.status, 403);
    assert.equal(JSON.parse(evil.body).error.code, "host_not_allowed");
    assert.equal((await withHost(server.url, "/v1/tasks", "localhost:8100")).status, 200);
  } finally {
    await server.close();
    await pool.close();
  }
});

test("14. with a key, /health says only that the server is up and /metrics needs the key: adapter names go to key holders only", async () => {
  const server = await startServer({ model, port: 0, apiKey: "k3y", allowRuntimeLora: true });
  const auth = { authorization: "Bearer k3y" };
  try {
    const load = await fetch(`${server.url}/v1/load_lora_adapter`, { method: "POST", headers: { ...auth, "content-type": "application/json" }, body: JSON.stringify({ lora_name: "secret-adapter", lora_path: fixtureDir("qwen2-lora") }) });
    assert.equal(load.status, 200);
    const chat = await fetch(`${server.url}/v1/chat/completions`, { method: "POST", headers: { ...auth, "content-type": "application/json" }, body: JSON.stringify({ model: "secret-adapter", messages: [{ role: "user", content: "hi" }], max_tokens: 1 }) });
    assert.equal(chat.status, 200);
    const open = await fetch(`${server.url}/health`);
    assert.equal(open.status, 200);
    assert.deepEqual(await open.json(), { status: "ok" });
    const full = (await (await fetch(`${server.url}/health`, { headers: auth })).json()) as { models: string[] };
    assert.ok(full.models.includes("secret-adapter"));
    const metrics = await fetch(`${server.url}/metrics`);
    assert.equal(metrics.status, 401);
    assert.doesNotMatch(await metrics.text(), /secret-adapter/);
    const keyed = await fetch(`${server.url}/metrics`, { headers: auth });
    assert.equal(keyed.status, 200);
    assert.match(await keyed.text(), /lora_name="secret-adapter"/);
  } finally {
    await server.close();
  }
});
