import { test } from "node:test";
import assert from "node:assert/strict";
import { instructions, openingMessages, promptTemplateHash, systemPrompt, userPrompt } from "../../lib/episode/prompt.js";

test("system prompt = instructions + DDL + notes; user = question + evidence", () => {
  const sys = systemPrompt({ style: "single" }, "CREATE TABLE t (a INTEGER);", "NOTES\n- a is an id");
  assert.ok(sys.startsWith(instructions({ style: "single" })));
  assert.ok(sys.includes("CREATE TABLE t (a INTEGER);"));
  assert.ok(sys.trimEnd().endsWith("- a is an id"));
  assert.equal(userPrompt(" How many? ", "a means b"), "How many?\n\nEvidence: a means b");
  assert.equal(userPrompt("How many?", ""), "How many?");
  const m = openingMessages({ style: "tool", maxToolCalls: 3 }, "DDL", undefined, "Q", null);
  assert.equal(m.length, 2);
  assert.match(m[0].content ?? "", /at most 3 times/);
});

test("hermes protocol describes the tool in the system prompt; native does not", () => {
  assert.match(instructions({ style: "tool", protocol: "hermes" }), /<tools>[\s\S]*execute_sql_query[\s\S]*<\/tools>/);
  assert.doesNotMatch(instructions({ style: "tool", protocol: "native" }), /<tools>/);
});

test("the template hash is stable and changes with the template", () => {
  const a = promptTemplateHash({ style: "single" });
  assert.equal(a, promptTemplateHash({ style: "single" }));
  assert.notEqual(a, promptTemplateHash({ style: "tool" }));
  assert.notEqual(promptTemplateHash({ style: "tool", maxToolCalls: 5 }), promptTemplateHash({ style: "tool", maxToolCalls: 3 }));
  assert.notEqual(promptTemplateHash({ style: "tool", protocol: "native" }), promptTemplateHash({ style: "tool", protocol: "hermes" }));
  assert.match(a, /^[0-9a-f]{16}$/);
});
