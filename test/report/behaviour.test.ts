import { test } from "node:test";
import assert from "node:assert/strict";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { behaviourLines, behaviourProfile, behaviourTable, toolErrors, toolQueries } from "../../lib/report/behaviour.js";
import type { ReportRow } from "../../lib/report/rows.js";
import { runCli, scratchDir } from "../helpers.js";

const call = (query: string) => ({ id: "c", type: "function" as const, function: { name: "execute_sql_query", arguments: JSON.stringify({ query }) } });
const hermes = (query: string) => `<tool_call>\n{"name": "execute_sql_query", "arguments": {"query": ${JSON.stringify(query)}}}\n</tool_call>`;

// a native episode that runs its answer first, a hermes one that probes and hits an error, a single-style reply, one cut off
const rows: ReportRow[] = [
  { task_id: "a", sample: 0, correct: true, executes: true, final_sql: "SELECT 1", n_tool_calls: 2, invalid_tool_calls: 0, n_assistant_turns: 3, outcome: "correct", tokens_out: 30, tokens_in: 300,
    turns: [{ role: "user", content: "q" }, { role: "assistant", content: "", tool_calls: [call("SELECT DISTINCT x FROM t")] }, { role: "tool", content: "x\n1" }, { role: "assistant", content: "", tool_calls: [call("select 1;")] }, { role: "tool", content: "1\n1" }, { role: "assistant", content: "```sql\nSELECT 1\n```" }] },
  { task_id: "b", sample: 0, correct: false, executes: true, final_sql: "SELECT 2", n_tool_calls: 2, invalid_tool_calls: 1, n_assistant_turns: 2, outcome: "wrong_rows", tokens_out: 20, tokens_in: 200,
    turns: [{ role: "user", content: "q" }, { role: "assistant", content: `${hermes("SELECT 2")}\n${hermes("SELEC oops")}` }, { role: "user", content: "<tool_response>\n2\n2\n</tool_response>\n<tool_response>\nerror (sql_error): near SELEC\n</tool_response>" }, { role: "assistant", content: "<solution>SELECT 2</solution>" }] },
  { task_id: "c", sample: 0, correct: false, executes: false, final_sql: "SELECT nope", n_tool_calls: 0, invalid_tool_calls: 0, n_assistant_turns: 1, outcome: "sql_error", tokens_out: 10, tokens_in: 100,
    turns: [{ role: "user", content: "q" }, { role: "assistant", content: "```sql\nSELECT nope\n```" }] },
  { task_id: "d", sample: 0, correct: false, executes: false, final_sql: null, n_tool_calls: 0, invalid_tool_calls: 0, n_assistant_turns: 1, outcome: "truncated", tokens_out: 128, tokens_in: 100,
    turns: [{ role: "user", content: "q" }, { role: "assistant", content: "SELECT" }] },
];

test("tool queries and tool errors are read from native and hermes turns alike", () => {
  assert.deepEqual(toolQueries(rows[0].turns as never), ["SELECT DISTINCT x FROM t", "select 1;"]);
  assert.deepEqual(toolQueries(rows[1].turns as never), ["SELECT 2", "SELEC oops"]);
  assert.equal(toolErrors(rows[1].turns as never), 1);
  assert.equal(toolErrors([{ role: "tool", content: "error: unknown tool 'x'" }]), 1);
});

test("the behaviour profile of a rows set, per episode", () => {
  const p = behaviourProfile(rows);
  assert.equal(p.episodes, 4);
  assert.equal(p.executable, 0.5);
  // a: ran "select 1;" and answered "SELECT 1" (normalised match only); b: ran exactly what it answered
  assert.equal(p.answered_with_ran_query, 0.5);
  assert.equal(p.answered_with_ran_query_exact, 0.25);
  assert.equal(p.with_tool_call, 0.5);
  assert.equal(p.tool_calls, 1);
  assert.equal(p.invalid_tool_calls, 0.25);
  assert.equal(p.tool_errors, 0.25);
  assert.equal(p.assistant_turns, 7 / 4);
  assert.equal(p.no_committed_query, 0.25);
  assert.equal(p.tokens_out, 47);
  assert.equal(p.tokens_in, 175);
  const t = behaviourTable([{ label: "before", rows: rows.slice(2) }, { label: "after", rows }]).objects() as Array<Record<string, unknown>>;
  const calls = t.find((r) => r.measure === "tool calls per episode")!;
  assert.deepEqual([calls.before, calls.after, calls.change], [0, 1, 1]);
  assert.match(behaviourLines([{ label: "rows", rows }]).join("\n"), /share answering with a query it ran \(exact\)\s+0\.250/);
});

test("t2s report --behaviour prints the profile (with --baseline, before/after) and --json carries it", async () => {
  const dir = scratchDir();
  const a = join(dir, "a.jsonl");
  const b = join(dir, "b.jsonl");
  writeFileSync(a, rows.slice(2).map((r) => JSON.stringify({ ...r, eval_run: "0" })).join("\n") + "\n");
  writeFileSync(b, rows.map((r) => JSON.stringify({ ...r, eval_run: "0" })).join("\n") + "\n");
  const r = await runCli(["report", "--rows", b, "--behaviour", "--baseline", a]);
  assert.equal(r.code, 0, r.stderr);
  assert.match(r.stdout, /behaviour \(before: .*a\.jsonl\)/);
  assert.match(r.stdout, /tool calls per episode\s+0\.000\s+1\.000\s+\+1\.000/);
  const j = await runCli(["report", "--rows", b, "--behaviour", "--json"]);
  assert.equal(JSON.parse(j.stdout).behaviour.rows.tool_calls, 1);
  const bad = await runCli(["report", "--rows", b, "--baseline", a]);
  assert.equal(bad.code, 2);
  assert.match(bad.stderr, /--baseline needs --behaviour/);
});
