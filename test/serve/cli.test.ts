import { test } from "node:test";
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { HANG_GUARD_MS, runCli, t2sBin } from "../helpers.js";
import { fixtureDir } from "../model/fixtures.js";

test("t2s serve starts, names its backend and models, answers, and stops on SIGINT", async () => {
  const child = spawn(process.execPath, [t2sBin, "serve", "--model", fixtureDir("qwen2"), "--adapter", `sql=${fixtureDir("qwen2-lora")}`, "--port", "0", "--backend", "cpu", "--max-model-len", "1024"], { stdio: ["ignore", "pipe", "pipe"] });
  let out = "";
  const url = await new Promise<string>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`no banner: ${out}`)), HANG_GUARD_MS);
    child.stdout.on("data", (d) => {
      out += d;
      const m = /at (http:\/\/\S+)\/v1 \(backend cpu\)/.exec(out);
      if (m) {
        clearTimeout(timer);
        resolve(m[1]);
      }
    });
    child.on("exit", (code) => reject(new Error(`exited ${code}: ${out}`)));
  });
  assert.match(out, /serving qwen2, sql at/);
  const res = await fetch(`${url}/v1/chat/completions`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ model: "sql", messages: [{ role: "user", content: "hi" }], max_tokens: 3 }) });
  assert.equal(res.status, 200);
  const body = (await res.json()) as { model: string; usage: { completion_tokens: number } };
  assert.equal(body.model, "sql");
  assert.ok(body.usage.completion_tokens >= 1);
  const code = await new Promise<number | null>((resolve) => {
    child.on("exit", resolve);
    child.kill("SIGINT");
  });
  assert.equal(code, 0);
});

test("t2s serve rejects a malformed --adapter with exit 2", async () => {
  const r = await runCli(["serve", "--model", fixtureDir("qwen2"), "--adapter", "justadir"]);
  assert.equal(r.code, 2);
  assert.match(r.stderr, /NAME=DIR/);
});

test("t2s serve --engine-thread takes worker or main; anything else is exit 2 before the model loads", async () => {
  const r = await runCli(["serve", "--model", fixtureDir("qwen2"), "--engine-thread", "gpu"]);
  assert.equal(r.code, 2);
  assert.match(r.stderr, /^error \[usage\]: --engine-thread must be one of worker, main, got 'gpu'/m);
  const help = await runCli(["serve", "--help"]);
  assert.match(help.stdout, /--engine-thread <where>/);
});
