/**
 * t2s serve's engine thread on WebGPU: Dawn runs in the worker thread (the HTTP thread never loads it), and
 * greedy and guided replies equal those of the engine on the HTTP thread. Needs a WebGPU adapter (skipped
 * without one; lavapipe works: bash scripts/lavapipe.sh run node scripts/run-tests.mjs <this file>).
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { isT2sError } from "../../lib/core/errors.js";
import { startServer, type RunningServer } from "../../lib/serve/server.js";
import { fixtureDir } from "../model/fixtures.js";
import { HANG_GUARD_MS } from "../helpers.js";
import { postJson } from "./attack-helpers.js";

const LOAD = { dir: fixtureDir("qwen2"), backend: "webgpu", name: "tiny", contextLength: 512 };
const SCHEMA = { type: "object", properties: { key: { type: "string" }, ok: { type: "boolean" } }, required: ["key", "ok"], additionalProperties: false };
const BODIES = [
  { model: "tiny", messages: [{ role: "user", content: "How many orders?" }], max_tokens: 12, temperature: 0, ignore_eos: true },
  { model: "tiny", messages: [{ role: "user", content: "Look it up" }], response_format: { type: "json_schema", json_schema: { name: "lookup", schema: SCHEMA } }, max_tokens: 48, temperature: 1, seed: 4 },
];

async function replies(server: RunningServer): Promise<unknown[]> {
  const out: unknown[] = [];
  for (const body of BODIES) {
    const res = await postJson(`${server.url}/v1/chat/completions`, body);
    const json = (await res.json()) as { choices: unknown[] };
    assert.equal(res.status, 200, JSON.stringify(json));
    out.push(json.choices);
  }
  return out;
}

test("WebGPU in the engine thread: the same greedy and guided replies as on the HTTP thread", { timeout: HANG_GUARD_MS }, async (t) => {
  let worker: RunningServer;
  try {
    worker = await startServer({ load: LOAD, port: 0 });
  } catch (e) {
    if (isT2sError(e, "backend_unavailable")) return t.skip(`no WebGPU adapter: ${e.message}`);
    throw e;
  }
  let fromWorker: unknown[];
  try {
    assert.equal(worker.host.backend, "webgpu");
    fromWorker = await replies(worker);
  } finally {
    await worker.close();
  }
  const main = await startServer({ load: LOAD, engineThread: "main", port: 0 });
  try {
    assert.deepEqual(fromWorker, await replies(main));
  } finally {
    await main.close();
  }
});
