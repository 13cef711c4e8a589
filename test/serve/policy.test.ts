import { test } from "node:test";
import assert from "node:assert/strict";
import { loadPolicy } from "../../lib/policy/spec.js";
import { parseTfjsSpec } from "../../lib/policy/tfjs.js";
import { isT2sError } from "../../lib/core/errors.js";
import { fixtureDir } from "../model/fixtures.js";

test("tfjs:<dir>+<adapter> is a working Policy; concurrent calls are answered and seeded", async () => {
  process.env.T2S_BACKEND = "cpu";
  const policy = await loadPolicy(`tfjs:${fixtureDir("qwen2")}+${fixtureDir("qwen2-lora")}`);
  assert.equal(policy.model, "qwen2");
  assert.equal(policy.adapter, fixtureDir("qwen2-lora"));
  const ask = (seed: number) => policy.complete([{ role: "user", content: "How many orders?" }], { n: 2, max_tokens: 5, temperature: 1, seed });
  const [a, b, a2] = await Promise.all([ask(1), ask(2), ask(1)]);
  assert.equal(a.length, 2);
  assert.deepEqual(a.map((c) => c.text), a2.map((c) => c.text));
  for (const c of [...a, ...b]) {
    assert.ok(c.tokens_in > 5 && c.tokens_out >= 1 && c.tokens_out <= 5);
    assert.ok(["stop", "length", "tool_calls"].includes(c.finish_reason));
  }
  await policy.close?.();
});

test("malformed tfjs specs are usage errors", () => {
  assert.throws(() => parseTfjsSpec(""), (e) => isT2sError(e, "usage"));
  assert.throws(() => parseTfjsSpec("a+b+c"), (e) => isT2sError(e, "usage"));
  assert.deepEqual(parseTfjsSpec("m"), { modelDir: `${process.cwd()}/m`, adapterDir: null });
});
