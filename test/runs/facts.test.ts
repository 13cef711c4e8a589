import { test } from "node:test";
import assert from "node:assert/strict";
import { formatFacts, rolloutFacts } from "../../lib/runs/facts.js";
import type { RolloutRow } from "../../lib/runs/row.js";

const row = (outcome: string, has_sql: boolean, executes: boolean, extra: Partial<RolloutRow> = {}) =>
  ({ outcome, has_sql, executes, tokens_out: 10, latency_ms: 1000, n_assistant_turns: 1, n_tool_calls: 0, invalid_tool_calls: 0, rerolls: 0, ...extra }) as RolloutRow;

test("the failure breakdown tells no SQL, SQL errors, truncation, unsafe and tool misuse apart", () => {
  const f = rolloutFacts([
    row("correct", true, true, { n_tool_calls: 2, n_assistant_turns: 3, rerolls: 2 }),
    row("no_sql", false, false),
    row("sql_error", true, false, { invalid_tool_calls: 1 }),
    row("truncated", true, false),
    row("unsafe", true, false),
  ]);
  assert.deepEqual(f.outcomes, { correct: 1, no_sql: 1, sql_error: 1, truncated: 1, unsafe: 1 });
  assert.equal(f.no_sql_rate, 0.2);
  assert.equal(f.sql_error_rate, 0.2);
  assert.equal(f.truncated_rate, 0.2);
  assert.equal(f.unsafe_rate, 0.2);
  assert.equal(f.tool_misuse_rate, 0.2);
  assert.equal(f.mean_tool_calls, 0.4);
  assert.equal(f.rerolls, 2);
  assert.match(formatFacts(f), /no SQL 20\.0% \| SQL error 20\.0% \| truncated 20\.0% \| unsafe 20\.0% \| tool misuse 20\.0%/);
});
