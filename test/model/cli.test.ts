import { test } from "node:test";
import assert from "node:assert/strict";
import { runCli } from "../helpers.js";
import { fixtureDir, readReference } from "./fixtures.js";

test("t2s logits --ids --json prints the last position's full logits", async () => {
  const ref = readReference("llama");
  const seq = ref.sequences[1];
  const r = await runCli(["logits", "--model", fixtureDir("llama"), "--ids", seq.ids.join(","), "--json", "--backend", "cpu"]);
  assert.equal(r.code, 0, r.stderr);
  const out = JSON.parse(r.stdout);
  assert.equal(out.backend, "cpu");
  const last = seq.logits[seq.logits.length - 1];
  assert.equal(out.logits.length, last.length);
  out.logits.forEach((v: number, i: number) => assert.ok(Math.abs(v - last[i]) < 1e-4));
  assert.equal(out.top[0].logit, Math.max(...out.logits));
});

test("t2s generate --json with an adapter; bad flags exit 2", async () => {
  const r = await runCli(["generate", "--model", fixtureDir("llama"), "--adapter", fixtureDir("llama-lora"), "--prompt", "How many orders?", "--max-tokens", "5", "--n", "2", "--seed", "1", "--json", "--backend", "cpu"]);
  assert.equal(r.code, 0, r.stderr);
  const out = JSON.parse(r.stdout);
  assert.equal(out.samples.length, 2);
  for (const s of out.samples) {
    assert.ok(s.ids.length >= 1 && s.ids.length <= 5);
    assert.equal(s.logprobs.length, s.ids.length);
    assert.ok(["stop", "length"].includes(s.finish_reason));
  }
  const bad = await runCli(["logits", "--model", fixtureDir("llama"), "--ids", "1,x", "--backend", "cpu"]);
  assert.equal(bad.code, 2);
  assert.match(bad.stderr, /--ids/);
  const missing = await runCli(["logits", "--model", "/nonexistent/model", "--ids", "1", "--backend", "cpu"]);
  assert.equal(missing.code, 1);
  assert.match(missing.stderr, /does not exist/);
});
