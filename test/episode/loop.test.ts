import { test } from "node:test";
import assert from "node:assert/strict";
import { runEpisode, type EpisodeDeps, type GradeFacts } from "../../lib/episode/loop.js";
import { scriptedPolicy, type ScriptedReply } from "../../lib/policy/scripted.js";
import { CONTEXT_EXCEEDED, PolicyError, type ChatMessage, type Policy } from "../../lib/policy/types.js";
import type { ExecOutcome } from "../../lib/db/types.js";
import type { GradeResult } from "../../lib/verifier/types.js";

const opening: ChatMessage[] = [{ role: "system", content: "sys" }, { role: "user", content: "How many?" }];

/** A stand-in grader: the SQL in <solution> or ```sql, correct when it is "SELECT 42". */
function fakeGrade(graded: Array<{ reply: string; facts: GradeFacts }>) {
  return async (reply: string, facts: GradeFacts): Promise<GradeResult> => {
    graded.push({ reply, facts });
    const m = /<solution>([\s\S]*?)<\/solution>/.exec(reply) ?? /```sql\s*([\s\S]*?)```/.exec(reply);
    const sql = m ? m[1].trim() : null;
    if (facts.finishReason === "length") return { correct: false, executes: false, outcome: "truncated", reason: "cut", reward: 0, sql };
    if (!sql) return { correct: false, executes: false, outcome: "no_sql", reason: "no sql", reward: 0, sql };
    const correct = sql === "SELECT 42";
    return { correct, executes: true, outcome: correct ? "correct" : "wrong_rows", reason: correct ? "match" : "differs", reward: correct ? 1 : 0, sql };
  };
}

function deps(policy: Policy, graded: Array<{ reply: string; facts: GradeFacts }>, ran: string[] = []): EpisodeDeps {
  return {
    policy,
    runTool: async (q: string): Promise<ExecOutcome> => {
      ran.push(q);
      if (/drop/i.test(q)) return { ok: false, error: { kind: "unsafe", message: "only SELECT" } };
      return { ok: true, columns: ["n"], rows: [[42]], elapsedMs: 1, truncated: false };
    },
    grade: fakeGrade(graded),
  };
}

const call = (query: unknown) => ({ text: "", tool_calls: [{ name: "execute_sql_query", arguments: { query } }] });
const script = (...replies: ScriptedReply[]) => scriptedPolicy([{ replies }]);

test("single style grades ONLY the first reply, even when the policy would say more", async () => {
  const graded: Array<{ reply: string; facts: GradeFacts }> = [];
  const p = script("```sql\nSELECT 1\n```", "```sql\nSELECT 42\n```");
  const r = await runEpisode(opening, deps(p, graded), { style: "single" });
  assert.equal(r.n_assistant_turns, 1);
  assert.equal(r.graded_turn, 1);
  assert.equal(graded.length, 1);
  assert.equal(graded[0].reply, "```sql\nSELECT 1\n```");
  assert.equal(r.grade.outcome, "wrong_rows");
});

test("single style never sends tools and passes a cut reply to grading as truncated", async () => {
  const graded: Array<{ reply: string; facts: GradeFacts }> = [];
  let sawTools = false;
  const inner = script({ text: "```sql\nSELECT", finish_reason: "length" });
  const p: Policy = { ...inner, complete: (m, o) => ((sawTools = !!o.tools), inner.complete(m, o)) };
  const r = await runEpisode(opening, deps(p, graded), { style: "single" });
  assert.equal(sawTools, false);
  assert.equal(r.grade.outcome, "truncated");
  assert.equal(r.truncated_by, "max_tokens");
  assert.equal(r.finish_reason, "length");
});

test("tool style: native calls run on the executor, results go back as tool messages, final <solution> graded", async () => {
  const graded: Array<{ reply: string; facts: GradeFacts }> = [];
  const ran: string[] = [];
  const p = script(call("SELECT count(*) FROM t"), "Done: <solution>SELECT 42</solution>");
  const r = await runEpisode(opening, deps(p, graded, ran), { style: "tool" });
  assert.deepEqual(ran, ["SELECT count(*) FROM t"]);
  assert.equal(r.n_assistant_turns, 2);
  assert.equal(r.graded_turn, 2);
  assert.equal(r.n_tool_calls, 1);
  assert.equal(r.grade.outcome, "correct");
  const toolMsg = r.messages.find((m) => m.role === "tool");
  assert.equal(toolMsg?.content, "n\n42");
  assert.equal(toolMsg?.tool_call_id, r.messages[2].tool_calls?.[0].id);
});

test("tool style: hermes text calls are parsed and answered with <tool_response> user turns", async () => {
  const graded: Array<{ reply: string; facts: GradeFacts }> = [];
  const ran: string[] = [];
  const p = script('<tool_call>\n{"name": "execute_sql_query", "arguments": {"query": "SELECT 7"}}\n</tool_call>', "```sql\nSELECT 42\n```");
  const r = await runEpisode(opening, deps(p, graded, ran), { style: "tool", protocol: "hermes" });
  assert.deepEqual(ran, ["SELECT 7"]);
  assert.equal(r.messages[3].role, "user");
  assert.equal(r.messages[3].content, "<tool_response>\nn\n42\n</tool_response>");
  assert.equal(r.grade.outcome, "correct");
});

test("invalid tool calls (bad JSON, unknown tool, unsafe SQL) get an error reply and are counted", async () => {
  const graded: Array<{ reply: string; facts: GradeFacts }> = [];
  const p = script(
    "<tool_call>{oops}</tool_call>",
    { text: "", tool_calls: [{ name: "delete_rows", arguments: {} }] },
    call("DROP TABLE t"),
    "<solution>SELECT 42</solution>",
  );
  const r = await runEpisode(opening, deps(p, graded), { style: "tool" });
  assert.equal(r.invalid_tool_calls, 3);
  assert.equal(r.n_tool_calls, 3);
  assert.equal(graded[0].facts.invalidToolCalls, 3);
  assert.match(r.messages[3].content ?? "", /^<tool_response>\nerror: the tool call is not valid JSON/);
  assert.match(r.messages[5].content ?? "", /unknown tool 'delete_rows'/);
  assert.match(r.messages[7].content ?? "", /error \(unsafe\)/);
});

test("the tool-call budget: the last allowed result says so, one more call truncates the episode", async () => {
  const graded: Array<{ reply: string; facts: GradeFacts }> = [];
  const p = script(call("SELECT 1"), call("SELECT 2"), call("SELECT 3"));
  const r = await runEpisode(opening, deps(p, graded), { style: "tool", maxToolCalls: 2 });
  assert.equal(r.n_tool_calls, 2);
  assert.equal(r.n_assistant_turns, 3);
  assert.equal(r.truncated_by, "tool_calls");
  assert.equal(r.grade.outcome, "truncated");
  assert.match(r.messages.filter((m) => m.role === "tool")[1].content ?? "", /no tool calls left/);
});

test("the context budget stops before a turn that would not fit; a context refusal of a later turn too", async () => {
  const graded: Array<{ reply: string; facts: GradeFacts }> = [];
  const p = script({ text: "", tool_calls: [{ name: "execute_sql_query", arguments: { query: "SELECT 1" } }], tokens_out: 900 }, "<solution>SELECT 42</solution>");
  const r = await runEpisode(opening, deps(p, graded), { style: "tool", maxContextTokens: 1000, sampling: { max_tokens: 200 } });
  assert.equal(r.truncated_by, "context");
  assert.equal(r.n_assistant_turns, 1);
  // the conversation outgrew the window after a tool call: the episode's own doing, graded truncated
  const inner = script(call("SELECT 1"));
  let calls = 0;
  const later: Policy = { name: "x", complete: async (m, o) => { if (calls++ > 0) throw new PolicyError(CONTEXT_EXCEEDED, "too long", { setup: true }); return inner.complete(m, o); } };
  const r2 = await runEpisode(opening, deps(later, graded), { style: "tool" });
  assert.equal(r2.truncated_by, "context");
  assert.equal(r2.graded_turn, 1);
  assert.equal(r2.grade.outcome, "truncated");
});

test("a context refusal of the first turn is the setup's, not the model's: it is thrown, never graded", async () => {
  const graded: Array<{ reply: string; facts: GradeFacts }> = [];
  const refused: Policy = { name: "x", complete: async () => { throw new PolicyError(CONTEXT_EXCEEDED, "the prompt has 3000 tokens", { setup: true }); } };
  await assert.rejects(runEpisode(opening, deps(refused, graded), { style: "tool" }), (e: unknown) => e instanceof PolicyError && e.setup && e.reason === CONTEXT_EXCEEDED);
  assert.equal(graded.length, 0);
});

test("a reply with a <solution> ends the episode even if it also calls a tool", async () => {
  const graded: Array<{ reply: string; facts: GradeFacts }> = [];
  const ran: string[] = [];
  const p = script({ text: "<solution>SELECT 42</solution>", tool_calls: [{ name: "execute_sql_query", arguments: { query: "SELECT 9" } }] });
  const r = await runEpisode(opening, deps(p, graded, ran), { style: "tool" });
  assert.deepEqual(ran, []);
  assert.equal(r.grade.outcome, "correct");
});

test("each turn's seed is the sample seed plus the turn index", async () => {
  const seeds: Array<number | undefined> = [];
  const inner = script(call("SELECT 1"), "<solution>SELECT 42</solution>");
  const p: Policy = { ...inner, complete: (m, o) => (seeds.push(o.seed), inner.complete(m, o)) };
  await runEpisode(opening, deps(p, []), { style: "tool", sampling: { seed: 100 } });
  assert.deepEqual(seeds, [100, 101]);
});

test("non-budget policy errors propagate (the rollout counts them as lost)", async () => {
  const p: Policy = { name: "x", complete: async () => { throw new PolicyError("http_500", "down", { retryable: true }); } };
  await assert.rejects(runEpisode(opening, deps(p, []), { style: "single" }), /down/);
});

test("with endOnUnsafeTool an unsafe tool query ends the episode, graded unsafe; without it the episode goes on", async () => {
  const graded: Array<{ reply: string; facts: GradeFacts }> = [];
  const p = script(call("SELECT 1"), call("DROP TABLE t"), "```sql\nSELECT 42\n```");
  const r = await runEpisode(opening, deps(p, graded), { style: "tool", endOnUnsafeTool: true });
  assert.equal(r.n_assistant_turns, 2);
  assert.equal(r.n_tool_calls, 2);
  assert.equal(r.invalid_tool_calls, 1);
  assert.equal(graded[0].facts.unsafeToolQuery, "DROP TABLE t");
  assert.equal(r.messages[r.messages.length - 1].role, "tool");
  const graded2: Array<{ reply: string; facts: GradeFacts }> = [];
  const r2 = await runEpisode(opening, deps(script(call("SELECT 1"), call("DROP TABLE t"), "```sql\nSELECT 42\n```"), graded2), { style: "tool" });
  assert.equal(r2.n_assistant_turns, 3);
  assert.equal(graded2[0].facts.unsafeToolQuery, undefined);
  assert.equal(r2.grade.outcome, "correct");
});

test("an opening that already holds tool turns (context padding): single style grades the model's own reply, and counts only its turns", async () => {
  const graded: Array<{ reply: string; facts: GradeFacts }> = [];
  const padded: ChatMessage[] = [
    ...opening,
    { role: "assistant", content: "", tool_calls: [{ id: "pad_1", type: "function", function: { name: "execute_sql_query", arguments: '{"query":"SELECT 1"}' } }] },
    { role: "tool", tool_call_id: "pad_1", name: "execute_sql_query", content: "1\n1" },
  ];
  const seen: ChatMessage[][] = [];
  const inner = script("```sql\nSELECT 42\n```");
  const p: Policy = { ...inner, complete: (m, o) => (seen.push([...m]), inner.complete(m, o)) };
  const r = await runEpisode(padded, deps(p, graded), { style: "single" });
  assert.deepEqual(seen[0], padded, "the model is asked after the padding");
  assert.equal(r.n_assistant_turns, 1);
  assert.equal(r.graded_turn, 1);
  assert.equal(r.graded_text, "```sql\nSELECT 42\n```");
  assert.deepEqual(graded[0].facts.assistantTurns, ["```sql\nSELECT 42\n```"]);
  assert.equal(r.grade.outcome, "correct");
  assert.equal(r.n_tool_calls, 0);
});
