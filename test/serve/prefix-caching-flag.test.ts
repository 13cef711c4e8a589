/**
 * `t2s serve` keeps prompts across requests by default and reports it on /metrics
 * (vllm:prefix_cache_queries_total / vllm:prefix_cache_hits_total); `--no-enable-prefix-caching` turns it off.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { HANG_GUARD_MS, t2sBin } from "../helpers.js";
import { fixtureDir } from "../model/fixtures.js";

const MSGS = [{ role: "user", content: "How many orders?" }];

/** The prefix-cache counters after the same prompt was asked twice, one request after the other. */
async function countersAfterTwoRequests(flags: string[]): Promise<{ queries: number; hits: number; prompt: number }> {
  const child = spawn(process.execPath, [t2sBin, "serve", "--model", fixtureDir("qwen2"), "--name", "tiny", "--port", "0", "--backend", "cpu", ...flags], { stdio: ["ignore", "pipe", "pipe"] });
  const exited = new Promise((r) => child.once("exit", r));
  try {
    let out = "";
    const url = await new Promise<string>((resolve, reject) => {
      child.stdout.on("data", (d) => {
        out += d;
        const m = /at (http:\/\/\S+)\/v1/.exec(out);
        if (m) resolve(m[1]);
      });
      child.once("exit", (code) => reject(new Error(`t2s serve exited ${code}: ${out}`)));
    });
    let prompt = 0;
    for (let i = 0; i < 2; i++) {
      const res = await fetch(`${url}/v1/chat/completions`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ model: "tiny", messages: MSGS, max_tokens: 2 }) });
      assert.equal(res.status, 200);
      prompt = ((await res.json()) as { usage: { prompt_tokens: number } }).usage.prompt_tokens;
    }
    const text = await (await fetch(`${url}/metrics`)).text();
    const value = (name: string) => Number(new RegExp(`^${name}\\{[^}]*\\} (\\S+)$`, "m").exec(text)?.[1]);
    return { queries: value("vllm:prefix_cache_queries_total"), hits: value("vllm:prefix_cache_hits_total"), prompt };
  } finally {
    child.kill("SIGINT");
    await exited;
  }
}

test("t2s serve caches prompts by default and not with --no-enable-prefix-caching", { timeout: HANG_GUARD_MS }, async () => {
  const on = await countersAfterTwoRequests([]);
  assert.ok(on.prompt > 16, "the prompt spans a full block");
  assert.equal(on.queries, 2 * on.prompt);
  // the second request finds every full block of the first but the sampled last token's
  assert.equal(on.hits, 16 * Math.floor((on.prompt - 1) / 16));
  const off = await countersAfterTwoRequests(["--no-enable-prefix-caching"]);
  assert.deepEqual([off.queries, off.hits], [0, 0]);
});
