import { test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync, rmSync, writeFileSync } from "node:fs";
import Database from "better-sqlite3";
import { join } from "node:path";
import { runCli, scratchDir } from "../helpers.js";
import { startFakeOpenAI, scriptedResponder, type FakeRule } from "../support/fake-openai.js";
import { fenced, makeItemsDb, writeItemTasks } from "../support/fixtures.js";
import type { RolloutRow } from "../../lib/runs/row.js";
import { selectTasks } from "../../lib/tasks/select.js";
import { parseBand } from "../../lib/cli/benchmark.js";
import type { Task } from "../../lib/tasks/types.js";

const rowsOf = (path: string) => readFileSync(path, "utf8").split("\n").filter(Boolean).map((l) => JSON.parse(l) as RolloutRow);

const SINGLE_RULES: FakeRule[] = [
  { match: "How many items", turns: [{ content: fenced("SELECT count(*) FROM items") }] },
  { match: "most expensive", turns: [{ content: fenced("SELECT name FROM items ORDER BY price ASC LIMIT 1") }] },
  { match: "less than 5", turns: [[{ status: 500 }, { status: 503 }, { content: fenced("SELECT name FROM items WHERE price < 5") }]] },
  { match: "names of all", turns: [{ content: "```sql\nSELECT name FROM it", finish_reason: "length" }] },
  { match: "cost together", turns: [{ content: fenced("SELECT sum(price) FROM items"), delay_ms: 150 }] },
  { match: "cheapest", turns: [[{ status: 429 }, { content: fenced("SELECT name FROM items ORDER BY price LIMIT 1") }]] },
];

function setup() {
  const dir = scratchDir();
  makeItemsDb(dir);
  return { dir, tasks: writeItemTasks(dir), out: join(dir, "rows.jsonl") };
}

const baseArgs = (url: string, tasks: string, out: string) => ["benchmark", "--policy", `openai:fake@${url}`, "--tasks", tasks, "--out", out, "--k", "2", "--backoff-ms", "1", "--workers", "1", "--concurrency", "4"];

test("single style against a live server: rows and report match what the server was set to do", async () => {
  const server = await startFakeOpenAI(scriptedResponder(SINGLE_RULES));
  const { tasks, out } = setup();
  try {
    const r = await runCli([...baseArgs(server.baseUrl, tasks, out), "--json"]);
    assert.equal(r.code, 0, r.stderr);
    const rows = rowsOf(out);
    assert.equal(rows.length, 12);
    const by = (id: string) => rows.filter((x) => x.task_id === id);
    assert.ok(by("count").every((x) => x.correct && x.outcome === "correct"));
    assert.ok(by("priciest").every((x) => !x.correct && x.outcome === "wrong_rows" && x.executes));
    assert.ok(by("cheap").every((x) => x.correct && x.rerolls === 2));
    assert.ok(by("names").every((x) => x.outcome === "truncated" && x.finish_reason === "length" && !x.correct));
    assert.ok(by("total").every((x) => x.correct && x.latency_ms >= 100));
    assert.ok(by("busy").every((x) => x.correct && x.rerolls === 1));
    assert.ok(rows.every((x) => x.n_assistant_turns === 1 && x.graded_turn === 1 && x.style === "single"));
    // single style asks once per sample: no follow-up turn was ever requested
    assert.ok(server.requests.every((q) => q.turn === 0 && !q.hasTools));
    const report = JSON.parse(r.stdout);
    assert.equal(report.summary.n_tasks, 6);
    assert.equal(report.summary.n_rows, 12);
    assert.equal(report.summary.pass1, 4 / 6);
    assert.deepEqual(report.progress.rerolled_by, { http_500: 2, http_503: 2, http_429: 2 });
    assert.equal(report.progress.lost, 0);
    assert.equal(report.facts.outcomes.truncated, 2);
    assert.equal(report.facts.outcomes.wrong_rows, 2);
    // the system prompt carried the schema with its column comments
    assert.match(server.requests[0].messages[0].content ?? "", /CREATE TABLE items[\s\S]*price in USD/);
  } finally {
    await server.close();
  }
});

test("re-running the same command resumes without new requests; the text report prints pass@k", async () => {
  const server = await startFakeOpenAI(scriptedResponder(SINGLE_RULES));
  const { tasks, out } = setup();
  try {
    const first = await runCli(baseArgs(server.baseUrl, tasks, out));
    assert.equal(first.code, 0, first.stderr);
    assert.match(first.stdout, /pass@1\s+0\.667/);
    assert.match(first.stdout, /pass@2/);
    assert.match(first.stdout, /truncated 16\.7%/);
    const n = server.requests.length;
    const again = await runCli(baseArgs(server.baseUrl, tasks, out));
    assert.equal(again.code, 0, again.stderr);
    assert.equal(server.requests.length, n);
    assert.equal(rowsOf(out).length, 12);
    assert.match(again.stdout, /rows 12\/12 \(12 resumed\)/);
    const changed = await runCli([...baseArgs(server.baseUrl, tasks, out), "--temperature", "1"]);
    assert.equal(changed.code, 1);
    assert.match(changed.stderr, /not_comparable.*temperature: 0\.7 -> 1.*--force/);
  } finally {
    await server.close();
  }
});

test("a rows file without its meta is refused for appending unless --force; a top-up against another database is not_comparable", async () => {
  const server = await startFakeOpenAI(scriptedResponder(SINGLE_RULES));
  const { dir, tasks, out } = setup();
  try {
    const first = await runCli([...baseArgs(server.baseUrl, tasks, out), "--limit", "2"]);
    assert.equal(first.code, 0, first.stderr);
    const meta = JSON.parse(readFileSync(`${out}.meta.json`, "utf8"));
    const { fileSha256 } = await import("../../lib/db/copies.js");
    assert.deepEqual(meta.db_sha256, { items: fileSha256(join(dir, "items.sqlite")) });
    rmSync(`${out}.meta.json`);
    const refused = await runCli([...baseArgs(server.baseUrl, tasks, out), "--temperature", "1", "--k", "3", "--limit", "2"]);
    assert.equal(refused.code, 1);
    assert.match(refused.stderr, /^error \[no_meta\]: .*rows\.jsonl holds rows but no .*rows\.jsonl\.meta\.json.*--force/);
    assert.equal(rowsOf(out).length, 4, "nothing was appended");
    const forced = await runCli([...baseArgs(server.baseUrl, tasks, out), "--limit", "2", "--force"]);
    assert.equal(forced.code, 0, forced.stderr);
    assert.match(JSON.parse(readFileSync(`${out}.meta.json`, "utf8")).forced.join(" "), /meta\.json was missing/);
    // the database changes under the rows: topping them up would mix answers graded against two databases
    const db = new Database(join(dir, "items.sqlite"));
    db.exec("UPDATE items SET price = 3 WHERE id = 1");
    db.close();
    const topUp = await runCli([...baseArgs(server.baseUrl, tasks, out), "--limit", "2", "--k", "3"]);
    assert.equal(topUp.code, 1);
    assert.match(topUp.stderr, /^error \[not_comparable\]: .*db_sha256 of items: [0-9a-f]{12}\.\.\. -> [0-9a-f]{12}\.\.\. \(the database changed\)/);
    assert.equal(rowsOf(out).length, 4);
  } finally {
    await server.close();
  }
});

test("tool style with native tool calls: the tool runs on the database and the final answer is graded", async () => {
  const server = await startFakeOpenAI(scriptedResponder([
    { match: "How many items", turns: [{ tool_calls: [{ name: "execute_sql_query", arguments: { query: "SELECT count(*) AS n FROM items" } }] }, { content: "<solution>SELECT count(*) FROM items</solution>" }] },
    { match: "most expensive", turns: [{ tool_calls: [{ name: "execute_sql_query", arguments: "{bad json" }] }, { tool_calls: [{ name: "execute_sql_query", arguments: { query: "DELETE FROM items" } }] }, { content: "<solution>SELECT name FROM items ORDER BY price DESC LIMIT 1</solution>" }] },
    { match: "less than 5", turns: [{ content: "<solution>DELETE FROM items WHERE price < 5</solution>" }] },
    { match: "", turns: [{ content: "I do not know." }] },
  ]));
  const { tasks, out } = setup();
  try {
    const r = await runCli([...baseArgs(server.baseUrl, tasks, out), "--style", "tool", "--limit", "4", "--json"]);
    assert.equal(r.code, 0, r.stderr);
    const rows = rowsOf(out);
    assert.equal(rows.length, 8);
    const count = rows.find((x) => x.task_id === "count")!;
    assert.equal(count.correct, true);
    assert.equal(count.n_assistant_turns, 2);
    assert.equal(count.graded_turn, 2);
    assert.equal(count.n_tool_calls, 1);
    assert.equal(count.turns.find((m) => m.role === "tool")?.content, "n\n5");
    const pricey = rows.find((x) => x.task_id === "priciest")!;
    assert.equal(pricey.correct, true);
    assert.equal(pricey.invalid_tool_calls, 2);
    assert.equal(pricey.n_assistant_turns, 3);
    const cheap = rows.find((x) => x.task_id === "cheap")!;
    assert.equal(cheap.outcome, "unsafe");
    assert.equal(cheap.correct, false);
    const names = rows.find((x) => x.task_id === "names")!;
    assert.equal(names.outcome, "no_sql");
    assert.equal(names.has_sql, false);
    assert.ok(server.requests.every((q) => q.hasTools));
  } finally {
    await server.close();
  }
});

test("tool style with hermes text calls: tools described in the prompt, results sent as <tool_response>", async () => {
  const server = await startFakeOpenAI(scriptedResponder([
    { match: "How many items", turns: [{ hermes: [{ name: "execute_sql_query", arguments: { query: "SELECT name FROM items" } }], content: "Let me look." }, { content: fenced("SELECT count(*) FROM items") }] },
    { match: "", turns: [{ content: fenced("SELECT 1") }] },
  ]));
  const { tasks, out } = setup();
  try {
    const r = await runCli([...baseArgs(server.baseUrl, tasks, out), "--style", "tool", "--protocol", "hermes", "--limit", "1", "--k", "1", "--tool-chars", "20", "--json"]);
    assert.equal(r.code, 0, r.stderr);
    const [row] = rowsOf(out);
    assert.equal(row.correct, true);
    assert.equal(row.protocol, "hermes");
    assert.ok(server.requests.every((q) => !q.hasTools));
    assert.match(server.requests[0].messages[0].content ?? "", /<tools>[\s\S]*execute_sql_query/);
    const response = server.requests[1].messages.at(-1)!;
    assert.equal(response.role, "user");
    // 5 names cut in the middle to 20 characters
    assert.equal(response.content, "<tool_response>\nname\npen\nb...(truncated)...p\nmug\ndesk\n</tool_response>");
  } finally {
    await server.close();
  }
});

test("a server that stays down: episodes are lost (no rows), the command says so and exits 1; the next run fills them", async () => {
  let down = true;
  const server = await startFakeOpenAI((req) => (down ? { status: 500 } : { content: fenced(req.question.includes("How many") ? "SELECT count(*) FROM items" : "SELECT 1") }));
  const { tasks, out } = setup();
  try {
    const r = await runCli([...baseArgs(server.baseUrl, tasks, out), "--limit", "2", "--retries", "1"]);
    assert.equal(r.code, 1);
    assert.match(r.stderr, /4 episode\(s\) lost/);
    assert.match(r.stdout, /lost 4 \(http_500 4\)/);
    assert.equal(rowsOf(out).length, 0);
    down = false;
    const again = await runCli([...baseArgs(server.baseUrl, tasks, out), "--limit", "2", "--retries", "1"]);
    assert.equal(again.code, 0, again.stderr);
    assert.equal(rowsOf(out).length, 4);
  } finally {
    await server.close();
  }
});

test("a request the server never answers times out and is re-rolled, not scored", async () => {
  const server = await startFakeOpenAI(scriptedResponder([{ match: "How many items", turns: [[{ hang: true }, { content: fenced("SELECT count(*) FROM items") }]] }]));
  const { tasks, out } = setup();
  try {
    const r = await runCli([...baseArgs(server.baseUrl, tasks, out), "--limit", "1", "--k", "1", "--request-timeout", "1", "--json"]);
    assert.equal(r.code, 0, r.stderr);
    const [row] = rowsOf(out);
    assert.equal(row.correct, true);
    assert.equal(row.rerolls, 1);
    assert.deepEqual(JSON.parse(r.stdout).progress.rerolled_by, { timeout: 1 });
  } finally {
    await server.close();
  }
});

test("bad flags exit 2 naming the flag", async () => {
  const r = await runCli(["benchmark", "--policy", "openai:m@http://127.0.0.1:9/v1", "--tasks", "x.jsonl", "--out", "o.jsonl", "--style", "chatty"]);
  assert.equal(r.code, 2);
  assert.match(r.stderr, /--style must be one of single, tool/);
  const r2 = await runCli(["benchmark", "--policy", "nope", "--tasks", "x.jsonl", "--out", "o.jsonl"]);
  assert.equal(r2.code, 1);
});

test("--band keeps the tasks whose pass rate in an earlier rows file lies in [lo, hi]; a bad spec exits 2", async () => {
  const dir = scratchDir("bench-band");
  const rows = join(dir, "earlier.jsonl");
  const mk = (id: string, correct: boolean[]) => correct.map((c, i) => JSON.stringify({ task_id: id, sample: i, eval_run: "0", correct: c })).join("\n");
  writeFileSync(rows, [mk("a", [true, true]), mk("b", [true, false]), mk("c", [false, false])].join("\n") + "\n");
  const all = ["a", "b", "c", "d"].map((id) => ({ id, split: "train" }) as unknown as Task);
  assert.deepEqual(selectTasks(all, "train", undefined, { rows, lo: 0.1, hi: 0.9 }).map((t) => t.id), ["b"]);
  assert.deepEqual(selectTasks(all, undefined, undefined, { rows, lo: 0, hi: 1 }).map((t) => t.id), ["a", "b", "c"]);
  assert.deepEqual(parseBand(`${rows}:0.1:0.9`), { rows, lo: 0.1, hi: 0.9 });
  const bad = await runCli(["benchmark", "--policy", "scripted:x.jsonl", "--tasks", "t.jsonl", "--out", join(dir, "o.jsonl"), "--band", `${rows}:0.9:0.1`]);
  assert.equal(bad.code, 2);
  assert.match(bad.stderr, /--band/);
});
