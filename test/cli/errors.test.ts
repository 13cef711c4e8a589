import { test } from "node:test";
import assert from "node:assert/strict";
import { cpSync, rmSync } from "node:fs";
import { join } from "node:path";
import { HANG_GUARD_MS, runCli, scratchDir } from "../helpers.js";
import { fixtureDir } from "../model/fixtures.js";
import { reportError } from "../../lib/cli/main.js";

const env = { T2S_BACKEND: "cpu" };
const model = fixtureDir("llama");

/** One `error [code]: message` line, nothing else on stderr (no stack trace). */
function assertOneLine(stderr: string, code: string, what: string): void {
  const lines = stderr.split("\n").filter((l) => l.trim() !== "" && !/^(model |loaded |Error: Loader Message|Warning: vkEnumerate|\s+at GatherPhysicalDevices)/.test(l));
  assert.equal(lines.length, 1, `${what}: ${stderr}`);
  assert.match(lines[0], new RegExp(`^error \\[${code}\\]: `), what);
}

test("numeric flags are validated when parsed: exit 2 with one line naming the flag", async () => {
  const cases: Array<[string[], RegExp]> = [
    [["serve", "--model", model, "--port", "99999"], /--port must be an integer from 0 to 65535, got '99999'/],
    [["generate", "--model", model, "--prompt", "hi", "--temperature", "-1"], /--temperature must be a number >= 0, got '-1'/],
    [["generate", "--model", model, "--prompt", "hi", "--top-p", "0"], /--top-p must be a number > 0 and <= 1/],
    // refused before any model is looked for: the policy's folder does not even exist
    [["benchmark", "--policy", "tfjs:/no/such/model", "--tasks", "data/shop/tasks.jsonl", "--out", join(scratchDir(), "r.jsonl"), "--temperature", "-1"], /--temperature must be a number >= 0/],
    [["train", "grpo", "--config", "x.json", "--max-seconds", "-5"], /--max-seconds must be a number >= 0/],
    [["logits", "--model", model, "--ids", "1,-2"], /--ids must be comma-separated token ids/],
  ];
  for (const [args, re] of cases) {
    const r = await runCli(args, { env });
    assert.equal(r.code, 2, `${args.join(" ")}: ${r.stderr}`);
    assertOneLine(r.stderr, "usage", args.join(" "));
    assert.match(r.stderr, re);
  }
});

test("logits --ids outside the vocabulary is a usage error, not a stack trace", async () => {
  const r = await runCli(["logits", "--model", model, "--ids", "1,99999"], { env });
  assert.equal(r.code, 2, r.stderr);
  assertOneLine(r.stderr, "usage", "logits --ids 99999");
  assert.match(r.stderr, /token id 99999 is outside the vocabulary of llama \(ids 0 to \d+\)/);
});

test("a model folder without tokenizer.json is reported as such by serve, benchmark and train", async () => {
  const dir = join(scratchDir("t2s-notok-"), "model");
  cpSync(model, dir, { recursive: true });
  rmSync(join(dir, "tokenizer.json"));
  const serve = await runCli(["serve", "--model", dir, "--port", "0"], { env, timeoutMs: HANG_GUARD_MS });
  const bench = await runCli(["benchmark", "--policy", `tfjs:${dir}`, "--tasks", "data/shop/tasks.jsonl", "--limit", "1", "--k", "1", "--out", join(dir, "..", "rows.jsonl"), "--quiet"], { env });
  for (const [name, r] of [["serve", serve], ["benchmark", bench]] as const) {
    assert.equal(r.code, 1, `${name}: ${r.stderr}`);
    assertOneLine(r.stderr, "no_tokenizer", name);
    assert.match(r.stderr, /has no tokenizer\.json/);
  }
});

test("usage errors and failures are one line; T2S_DEBUG=1 adds the stack", async () => {
  const flag = await runCli(["info", "--bogus"]);
  assert.equal(flag.code, 2);
  assert.equal(flag.stderr, "error [usage]: unknown option '--bogus' (run with --help for usage)\n");
  const missing = await runCli(["report", "--rows", "/no/such/rows.jsonl"]);
  assert.equal(missing.code, 1);
  assertOneLine(missing.stderr, "not_found", "report");
  const debug = await runCli(["report", "--rows", "/no/such/rows.jsonl"], { env: { T2S_DEBUG: "1" } });
  assert.equal(debug.code, 1);
  assert.match(debug.stderr, /^error \[not_found\]: .*\n.*\n\s+at /);
});

test("a wasm heap trap is one line naming the memory and what to lower, exit 1", () => {
  const written: string[] = [];
  const write = process.stderr.write;
  process.stderr.write = ((chunk: string) => (written.push(String(chunk)), true)) as typeof process.stderr.write;
  let code: number;
  try {
    const wasm = (globalThis as unknown as { WebAssembly: { RuntimeError: new (m: string) => Error } }).WebAssembly;
    code = reportError(new wasm.RuntimeError("memory access out of bounds"));
  } finally {
    process.stderr.write = write;
  }
  assert.equal(code, 1);
  assertOneLine(written.join(""), "wasm_memory", "wasm trap");
  assert.match(written.join(""), /micro_batch_rows.*--backend webgpu/);
});
