/**
 * Refusals are errors, not scores: `t2s benchmark` against the kit's own server (started here on port 0,
 * the real shop model) with the default flags. The default --max-tokens plus the prompt passes the model's
 * 2,048-token window, so each request must be sized to the window; a wrong key, a wrong model name or a
 * window the prompts do not fit must end in one clear error, with no score.
 */
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { loadModel } from "../../lib/model/load.js";
import type { CausalLM } from "../../lib/model/model.js";
import { startServer, type RunningServer } from "../../lib/serve/server.js";
import type { RolloutRow } from "../../lib/runs/row.js";
import { runCli, scratchDir } from "../helpers.js";

const MODEL = "data/models/shop-sql-4m";
const KEY = "sk-refusals";
// one backend on both sides, so the served and the in-process runs sample the same tokens
const BACKEND = "wasm";
const env = { T2S_BACKEND: BACKEND, T2S_API_KEY: KEY };
const rowsOf = (path: string) => readFileSync(path, "utf8").split("\n").filter(Boolean).map((l) => JSON.parse(l) as RolloutRow);
const bench = (policy: string, out: string) => ["benchmark", "--policy", policy, "--tasks", "data/shop/tasks.jsonl", "--split", "holdout", "--limit", "8", "--k", "1", "--workers", "1", "--quiet", "--out", out];

let full: CausalLM;
let small: CausalLM;
let served: RunningServer;
let cramped: RunningServer;

before(async () => {
  full = await loadModel(MODEL, { backend: BACKEND });
  // a window shorter than any shop prompt (about 400 tokens)
  small = await loadModel(MODEL, { backend: BACKEND, contextLength: 300 });
  served = await startServer({ model: full, port: 0, apiKey: KEY });
  cramped = await startServer({ model: small, port: 0, apiKey: KEY });
});

after(async () => {
  await served.close();
  await cramped.close();
  full.dispose();
  small.dispose();
});

test("the default --max-tokens is sized to the served window: the run scores as in process, row for row", async () => {
  const dir = scratchDir();
  const viaServer = await runCli(bench(`openai:shop-sql-4m@${served.url}/v1`, join(dir, "served.jsonl")), { env });
  assert.equal(viaServer.code, 0, viaServer.stderr);
  const inProcess = await runCli(bench(`tfjs:${MODEL}`, join(dir, "local.jsonl")), { env });
  assert.equal(inProcess.code, 0, inProcess.stderr);
  const a = rowsOf(join(dir, "served.jsonl"));
  const b = rowsOf(join(dir, "local.jsonl"));
  assert.equal(a.length, 8);
  assert.ok(a.every((r) => r.outcome !== "truncated" && r.outcome !== "setup_error"), JSON.stringify(a.map((r) => r.outcome)));
  const byTask = (rows: RolloutRow[]) => Object.fromEntries(rows.map((r) => [r.task_id, [r.correct, r.final_sql]]));
  assert.deepEqual(byTask(a), byTask(b));
  const pass1 = (s: string) => /pass@1\s+([0-9.]+)/.exec(s)?.[1];
  assert.equal(pass1(viaServer.stdout), pass1(inProcess.stdout));
  assert.ok(Number(pass1(viaServer.stdout)) > 0);
});

test("a wrong key and a wrong model name each end the run with one clear error, and no score", async () => {
  const dir = scratchDir();
  const wrongKey = await runCli(bench(`openai:shop-sql-4m@${served.url}/v1`, join(dir, "key.jsonl")), { env: { ...env, T2S_API_KEY: "sk-wrong" } });
  assert.equal(wrongKey.code, 1);
  assert.equal(wrongKey.stdout, "");
  assert.match(wrongKey.stderr, /^error \[policy_auth\]: .*refused the API key \(401\).*T2S_API_KEY/);
  assert.equal(wrongKey.stderr.trim().split("\n").length, 1, wrongKey.stderr);
  const wrongModel = await runCli(bench(`openai:shop-sql@${served.url}/v1`, join(dir, "model.jsonl")), { env });
  assert.equal(wrongModel.code, 1);
  assert.equal(wrongModel.stdout, "");
  assert.match(wrongModel.stderr, /^error \[policy_not_found\]: .*404.*shop-sql/);
  assert.equal(wrongModel.stderr.trim().split("\n").length, 1, wrongModel.stderr);
  // what was refused is recorded as a setup error, never as a model outcome
  for (const [f, reason] of [["key.jsonl", "auth"], ["model.jsonl", "not_found"]]) {
    const rows = rowsOf(join(dir, f));
    assert.ok(rows.length >= 1 && rows.every((r) => r.outcome === "setup_error" && r.setup_error === reason), f);
  }
});

test("a window no prompt fits: every episode refused, one error naming the reason; the rows say so and score nothing", async () => {
  const dir = scratchDir();
  const out = join(dir, "rows.jsonl");
  const r = await runCli(bench(`openai:shop-sql-4m@${cramped.url}/v1`, out), { env });
  assert.equal(r.code, 1);
  assert.equal(r.stdout, "");
  assert.match(r.stderr, /^error \[policy_context_exceeded\]: every episode of this run \(8\) was refused.*the prompt has \d+ tokens and shop-sql-4m .* takes 300/);
  assert.equal(r.stderr.trim().split("\n").length, 1, r.stderr);
  const rows = rowsOf(out);
  assert.equal(rows.length, 8);
  assert.ok(rows.every((x) => x.outcome === "setup_error" && x.setup_error === "context_exceeded" && x.n_assistant_turns === 0));
  const report = await runCli(["report", "--rows", out]);
  assert.equal(report.code, 1);
  assert.match(report.stderr, /^error \[no_rows\]: .*no graded rows.*8 setup-error row\(s\).*context_exceeded 8/);
  // the same command against a server whose window fits runs the refused samples again, and they count
  const again = await runCli(bench(`openai:shop-sql-4m@${served.url}/v1`, out), { env });
  assert.equal(again.code, 0, again.stderr);
  const after = await runCli(["report", "--rows", out, "--json"]);
  const summary = JSON.parse(after.stdout) as { n_rows: number; setup_errors_left_out: number };
  assert.equal(summary.n_rows, 8);
  assert.equal(summary.setup_errors_left_out, 8);
});
