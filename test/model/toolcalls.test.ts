import { test } from "node:test";
import assert from "node:assert/strict";
import { parseToolCalls, toolCallText } from "../../lib/model/toolcalls.js";
import { parseHermesCalls } from "../../lib/episode/tools.js";
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

/** The regex reading parseToolCalls had before the block scanner was shared with the episode loop. */
function regexReading(text: string): { content: string | null; calls: { name: string; arguments: string }[]; invalid: number } {
  const calls: { name: string; arguments: string }[] = [];
  let invalid = 0;
  const content = text.replace(/<tool_call>\s*([\s\S]*?)\s*<\/tool_call>/g, (block, body: string) => {
    try {
      const v = JSON.parse(body) as { name?: unknown; arguments?: unknown; parameters?: unknown };
      const args = v.arguments ?? v.parameters ?? {};
      if (typeof v.name !== "string" || v.name === "") throw new Error("no name");
      calls.push({ name: v.name, arguments: typeof args === "string" ? args : JSON.stringify(args) });
      return "";
    } catch {
      invalid++;
      return block;
    }
  });
  const trimmed = content.trim();
  return { content: trimmed === "" ? null : trimmed, calls, invalid };
}

test("the block scanner reads every mix of calls, broken calls and text as the regex did; the episode sees the same blocks", () => {
  const pieces = [" text ", "\n", "<tool_call>", "</tool_call>", '{"name": "q", "arguments": {"query": "SELECT 1"}}', '{"name": ""}', '{"name": "p", "parameters": {"a": 1}}', "{oops}", "null", "[1]", "\u00a0"];
  let texts = [""];
  for (let depth = 0; depth < 4; depth++) texts = texts.flatMap((t) => pieces.map((p) => t + p));
  for (const text of texts) {
    assert.deepEqual(parseToolCalls(text), regexReading(text), JSON.stringify(text));
    const named = parseHermesCalls(text).filter((c) => !c.parseError && c.name !== "");
    assert.deepEqual(named.map((c) => ({ name: c.name, arguments: c.arguments })), parseToolCalls(text).calls, JSON.stringify(text));
  }
  assert.equal(texts.length, 11 ** 4);
});

test("a call written by toolCallText reads back as that call", () => {
  const text = toolCallText("execute_sql_query", '{"query": "SELECT \\"a\\" FROM t"}');
  assert.equal(text, '<tool_call>\n{"name": "execute_sql_query", "arguments": {"query": "SELECT \\"a\\" FROM t"}}\n</tool_call>');
  assert.deepEqual(parseToolCalls(text), { content: null, calls: [{ name: "execute_sql_query", arguments: '{"query":"SELECT \\"a\\" FROM t"}' }], invalid: 0 });
});
