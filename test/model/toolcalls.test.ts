import { test } from "node:test";
import assert from "node:assert/strict";
import { parseToolCalls } from "../../lib/model/toolcalls.js";
import { parseAdapterFlags } from "../../lib/cli/serve.js";
import { isT2sError } from "../../lib/core/errors.js";

test("hermes tool calls are split from the content", () => {
  const text = 'Let me check.\n<tool_call>\n{"name": "run_sql", "arguments": {"sql": "SELECT 1"}}\n</tool_call>\n<tool_call>{"name": "b", "arguments": "{\\"x\\": 2}"}</tool_call>';
  const r = parseToolCalls(text);
  assert.equal(r.content, "Let me check.");
  assert.deepEqual(r.calls, [{ name: "run_sql", arguments: '{"sql":"SELECT 1"}' }, { name: "b", arguments: '{"x": 2}' }]);
  assert.equal(r.invalid, 0);
});

test("malformed or unterminated calls stay in the content", () => {
  const r = parseToolCalls("<tool_call>{oops}</tool_call> and <tool_call>{\"name\": \"x\"");
  assert.equal(r.calls.length, 0);
  assert.equal(r.invalid, 1);
  assert.match(r.content!, /oops/);
  assert.equal(parseToolCalls("  ").content, null);
});

test("--adapter NAME=DIR parsing", () => {
  assert.deepEqual(parseAdapterFlags(["a=/x", "b=/y=z"]), { a: "/x", b: "/y=z" });
  assert.throws(() => parseAdapterFlags(["nodir"]), (e) => isT2sError(e, "usage"));
  assert.throws(() => parseAdapterFlags(["a=/x", "a=/y"]), (e) => isT2sError(e, "usage"));
});
