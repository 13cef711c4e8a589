import { test } from "node:test";
import assert from "node:assert/strict";
import { forcedToolCallPrefill, parseForcedToolCalls, parseToolCalls, ToolCallStream } from "../../lib/model/toolcalls.js";
import { mulberry32 } from "../../lib/core/random.js";

const CALL = '<tool_call>\n{"name": "run_sql", "arguments": {"query": "SELECT 1"}}\n</tool_call>';
const REPLIES = [
  "plain answer with no call",
  `  Let me look.\n${CALL}\n`,
  `${CALL}${CALL.replace("SELECT 1", "SELECT 2")}`,
  `before <tool_call>{not json}</tool_call> after <tool_`,
  `a < b and <tool_ca but not a tag\n\n`,
  `unclosed ${CALL.slice(0, 30)}`,
  "   \n  ",
  `x\n\n${CALL}\n\ny  `,
];

test("ToolCallStream releases content and calls that match parseToolCalls, however the text is split", () => {
  const rand = mulberry32(3);
  for (const reply of REPLIES) {
    const want = parseToolCalls(reply);
    for (let trial = 0; trial < 20; trial++) {
      const s = new ToolCallStream();
      let content = "";
      const calls: { name: string; arguments: string }[] = [];
      let at = 0;
      const take = (evs: ReturnType<ToolCallStream["push"]>) => {
        for (const e of evs) {
          if ("content" in e) content += e.content;
          else calls.push(e.call);
        }
      };
      while (at < reply.length) {
        const step = 1 + Math.floor(rand() * 6);
        take(s.push(reply.slice(at, at + step)));
        at += step;
      }
      take(s.end());
      assert.equal(content === "" ? null : content, want.content, JSON.stringify(reply));
      assert.deepEqual(calls, want.calls);
      assert.equal(s.invalid, want.invalid);
    }
  }
});

test("ToolCallStream holds only what may be a tool call: plain text goes out as it arrives", () => {
  const s = new ToolCallStream();
  assert.deepEqual(s.push("Hello"), [{ content: "Hello" }]);
  assert.deepEqual(s.push(" world <tool"), [{ content: " world" }]);
  assert.deepEqual(s.push("kit> here"), [{ content: " <toolkit> here" }]);
});

test("a forced call is always a call: well-formed, lenient, and named", () => {
  const named = parseForcedToolCalls(`${forcedToolCallPrefill("run_sql")}{"query": "SELECT 1"}}\n</tool_call>`, "run_sql");
  assert.deepEqual(named.calls, [{ name: "run_sql", arguments: '{"query":"SELECT 1"}' }]);
  assert.equal(named.content, null);
  const broken = parseForcedToolCalls(`${forcedToolCallPrefill("run_sql")}{"query": "SELECT`, "run_sql");
  assert.deepEqual(broken.calls, [{ name: "run_sql", arguments: '{"query": "SELECT' }]);
  const some = parseForcedToolCalls(`${forcedToolCallPrefill()}lookup", "arguments": {"k": 1}}`);
  assert.deepEqual(some.calls, [{ name: "lookup", arguments: '{"k":1}' }]);
  const garbage = parseForcedToolCalls(`${forcedToolCallPrefill()}zz!`);
  assert.equal(garbage.calls.length, 1);
  assert.equal(garbage.calls[0].name, "zz!");
});
