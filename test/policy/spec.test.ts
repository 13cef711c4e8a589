import { test } from "node:test";
import assert from "node:assert/strict";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { createPolicy, loadPolicy, registerPolicyKind } from "../../lib/policy/spec.js";
import { OpenAIPolicy } from "../../lib/policy/openai.js";
import { scratchDir } from "../helpers.js";

test("createPolicy makes an OpenAI policy from its spec", () => {
  const p = createPolicy("openai:qwen@http://127.0.0.1:9/v1");
  assert.ok(p instanceof OpenAIPolicy);
  assert.equal(p.model, "qwen");
  assert.equal(p.name, "openai:qwen@http://127.0.0.1:9/v1");
});

test("an unknown kind is a usage error listing the known kinds", async () => {
  assert.throws(() => createPolicy("nope:x"), /unknown policy 'nope:x'.*openai:/);
  await assert.rejects(loadPolicy("zzz:x"), /unknown policy/);
});

test("registered kinds (sync or async) are found by loadPolicy", async () => {
  registerPolicyKind("echo", async (rest) => ({ name: `echo:${rest}`, complete: async () => [] }));
  const p = await loadPolicy("echo:abc");
  assert.equal(p.name, "echo:abc");
  assert.throws(() => createPolicy("echo:abc"), /loadPolicy/);
});

test("scripted policy replays replies per turn and per matching question", async () => {
  const dir = scratchDir();
  const file = join(dir, "script.jsonl");
  writeFileSync(file, [
    JSON.stringify({ match: "alpha", replies: ["first", { text: "", tool_calls: [{ name: "execute_sql_query", arguments: { query: "SELECT 1" } }] }] }),
    JSON.stringify({ replies: [{ text: "cut", finish_reason: "length" }] }),
  ].join("\n") + "\n");
  const p = createPolicy(`scripted:${file}`);
  const [a] = await p.complete([{ role: "user", content: "alpha?" }], {});
  assert.equal(a.text, "first");
  const [b] = await p.complete([{ role: "user", content: "alpha?" }, { role: "assistant", content: "first" }], {});
  assert.equal(b.finish_reason, "tool_calls");
  assert.equal(b.tool_calls[0].function.name, "execute_sql_query");
  const [c] = await p.complete([{ role: "user", content: "other" }], {});
  assert.equal(c.finish_reason, "length");
});
