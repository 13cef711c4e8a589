import { test } from "node:test";
import assert from "node:assert/strict";
import { checkCall, hasSolution, parseHermesCalls, SQL_TOOL_NAME } from "../../lib/episode/tools.js";
import { formatToolResult, truncateMiddle, TRUNCATION_MARK } from "../../lib/episode/truncate.js";

test("hermes calls are parsed in order, with arguments as JSON text", () => {
  const text = 'Let me look.\n<tool_call>\n{"name": "execute_sql_query", "arguments": {"query": "SELECT 1"}}\n</tool_call>\n<tool_call>{"name":"execute_sql_query","arguments":{"query":"SELECT 2"}}</tool_call>';
  const calls = parseHermesCalls(text);
  assert.equal(calls.length, 2);
  assert.deepEqual(calls.map((c) => checkCall(c)).map((c) => (c.ok ? c.query : c.error)), ["SELECT 1", "SELECT 2"]);
  assert.equal(calls[0].source, "hermes");
});

test("bad hermes calls: invalid JSON, missing name, unclosed tag", () => {
  const bad = parseHermesCalls("<tool_call>{not json}</tool_call><tool_call>[1]</tool_call><tool_call>{\"name\": \"x\"");
  assert.equal(bad.length, 3);
  assert.match(checkCall(bad[0]).ok ? "" : (checkCall(bad[0]) as { error: string }).error, /not valid JSON/);
  assert.match((checkCall(bad[1]) as { error: string }).error, /"name"/);
  assert.match((checkCall(bad[2]) as { error: string }).error, /not closed/);
});

test("checkCall rejects unknown tools, bad argument JSON and a missing query", () => {
  const mk = (name: string, args: string | null) => ({ id: "c", name, arguments: args, source: "native" as const });
  assert.match((checkCall(mk("drop_table", "{}")) as { error: string }).error, /unknown tool 'drop_table'/);
  assert.match((checkCall(mk(SQL_TOOL_NAME, "{query:")) as { error: string }).error, /not valid JSON/);
  assert.match((checkCall(mk(SQL_TOOL_NAME, '{"sql": "SELECT 1"}')) as { error: string }).error, /"query"/);
  const ok = checkCall(mk(SQL_TOOL_NAME, '{"query": "SELECT 1"}'));
  assert.ok(ok.ok && ok.query === "SELECT 1");
});

test("hasSolution needs a closed <solution> block", () => {
  assert.ok(hasSolution("x <solution>SELECT 1</solution>"));
  assert.ok(!hasSolution("x <solution>SELECT 1"));
});

test("truncateMiddle keeps head and tail around the mark, exactly maxChars of content", () => {
  const text = "a".repeat(200) + "MIDDLE" + "z".repeat(200);
  const cut = truncateMiddle(text, 256);
  assert.equal(cut.length, 256 + TRUNCATION_MARK.length);
  assert.ok(cut.startsWith("a".repeat(128) + TRUNCATION_MARK));
  assert.ok(cut.endsWith("z".repeat(128)));
  assert.ok(!cut.includes("MIDDLE"));
  assert.equal(truncateMiddle("short", 256), "short");
  assert.equal(truncateMiddle("abcdefghij", 5), "abc" + TRUNCATION_MARK + "ij");
});

test("tool results: rows capped, NULL and blobs shown, long text cut in the middle or by rows", () => {
  const rows = Array.from({ length: 50 }, (_, i) => [i, i % 2 ? null : `name${i}`]);
  const out = { ok: true as const, columns: ["id", "name"], rows, elapsedMs: 1, truncated: false };
  const byRows = formatToolResult(out, { maxRows: 3, mode: "rows" });
  assert.equal(byRows, "id | name\n0 | name0\n1 | NULL\n2 | name2\n(only the first 3 rows are shown)");
  const middle = formatToolResult(out, { maxRows: 50, maxChars: 40 });
  assert.ok(middle.startsWith("id | name\n0 | name0"));
  assert.ok(middle.includes(TRUNCATION_MARK));
  assert.ok(middle.endsWith("49 | NULL"));
  assert.equal(formatToolResult({ ok: true, columns: ["b"], rows: [[{ blob: "ff00" }]], elapsedMs: 0, truncated: false }), "b\nx'ff00'");
  assert.equal(formatToolResult({ ok: true, columns: ["a"], rows: [], elapsedMs: 0, truncated: false }), "a\n(no rows)");
  assert.equal(formatToolResult({ ok: false, error: { kind: "syntax", message: "near FROM" } }), "error (syntax): near FROM");
});
