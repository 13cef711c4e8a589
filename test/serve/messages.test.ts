// The wire's chat messages become the kit's one ChatMessage type: tool-call arguments sent as objects are
// JSON text afterwards, and they render exactly as the same call sent as text.
import { test } from "node:test";
import assert from "node:assert/strict";
import { parseMessages, RequestError } from "../../lib/serve/protocol.js";
import { renderChat } from "../../lib/model/chat.js";
import { loadTokenizer } from "../../lib/model/tokenizer.js";
import { fixtureDir } from "../model/fixtures.js";

const history = (args: unknown, id?: string) => ({
  messages: [
    { role: "developer", content: "Answer with SQL." },
    { role: "user", content: "How many orders?" },
    { role: "assistant", content: null, tool_calls: [{ ...(id ? { id } : {}), type: "function", function: { name: "run_sql", arguments: args } }] },
    { role: "tool", tool_call_id: "c1", content: "42" },
  ],
});

test("tool-call arguments sent as an object become JSON text; a missing id is empty", () => {
  const msgs = parseMessages(history({ sql: "SELECT 1" }));
  assert.equal(msgs[0].role, "system");
  assert.deepEqual(msgs[2].tool_calls, [{ id: "", type: "function", function: { name: "run_sql", arguments: '{"sql":"SELECT 1"}' } }]);
  assert.equal(parseMessages(history('{"sql": "SELECT 1"}', "c1"))[2].tool_calls?.[0].id, "c1");
});

test("object and text arguments render the same chat-template text", () => {
  const tok = loadTokenizer(fixtureDir("qwen2"));
  const a = renderChat(tok, parseMessages(history({ sql: "SELECT 1" }, "c1")), { addGenerationPrompt: true });
  const b = renderChat(tok, parseMessages(history('{"sql": "SELECT 1"}', "c1")), { addGenerationPrompt: true });
  assert.equal(a, b);
  assert.match(a, /SELECT 1/);
});

test("a tool call without a function name is a 400 naming it", () => {
  assert.throws(() => parseMessages({ messages: [{ role: "assistant", content: null, tool_calls: [{ type: "function" }] }] }), (e: unknown) => e instanceof RequestError && /messages\[0\]\.tool_calls\[0\]/.test(e.message));
});
