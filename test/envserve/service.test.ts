import { test, after } from "node:test";
import assert from "node:assert/strict";
import { ExecutorPool } from "../../lib/db/pool.js";
import { runEpisode } from "../../lib/episode/loop.js";
import { sqlToolSpec } from "../../lib/episode/tools.js";
import { EnvService } from "../../lib/envserve/service.js";
import { startEnvServer } from "../../lib/envserve/server.js";
import { scriptedPolicy } from "../../lib/policy/scripted.js";
import { defaultEnv } from "../../lib/runs/env.js";
import { grade } from "../../lib/verifier/grade.js";
import { call, shopTasks } from "./fixture.js";

const tasks = shopTasks().slice(0, 40);
const pool = new ExecutorPool({ workers: 2 });
const toolOutput = { maxRows: 7, maxChars: 180, mode: "middle" as const };
const service = new EnvService({ executor: pool, tasks, prompt: { style: "tool", protocol: "native", maxToolCalls: 3 }, toolOutput });
const server = await startEnvServer({ service, port: 0 });
after(async () => {
  await server.close();
  await pool.close();
});

const QUERIES = [
  "SELECT * FROM customers", // long: cut in the middle
  "SELECT COUNT(*) AS n FROM orders", // short
  "SELECT * FROM customers WHERE 1 = 0", // no rows
  "SELECT nope FROM nowhere", // SQL error
  "DELETE FROM customers", // unsafe: counted invalid
  "SELECT order_id, status FROM orders ORDER BY order_id LIMIT 9", // more rows than shown
];

test("the tool endpoint returns byte-identical text to the episode's tool turn for the same query", async () => {
  const task = tasks[0];
  const env = defaultEnv({ executor: pool, prompt: service.prompt, toolRows: toolOutput.maxRows });
  for (const query of QUERIES) {
    const policy = scriptedPolicy([{ replies: [{ text: "", tool_calls: [{ name: "execute_sql_query", arguments: { query } }] }, "<solution>SELECT 1</solution>"] }]);
    const ep = await runEpisode(await env.opening(task), { policy, runTool: (q) => env.runTool(task, q), grade: (r, f) => env.grade(task, r, f) }, { style: "tool", maxToolCalls: 3, toolOutput });
    const toolTurn = ep.messages.find((m) => m.role === "tool");
    assert.ok(toolTurn, query);
    const r = await call(server.url, "/v1/tool", { task_id: task.id, query });
    assert.equal(r.status, 200);
    assert.equal(r.json.content, toolTurn!.content, query);
    assert.equal(r.json.invalid, ep.invalid_tool_calls === 1, query);
  }
});

test("a malformed call gets the episode's own error text, and the db form answers like the task form", async () => {
  const task = tasks[0];
  const bad = await call(server.url, "/v1/tool", { task_id: task.id, name: "execute_sql_query", arguments: "{oops" });
  assert.match(bad.json.content, /^error: the arguments are not valid JSON/);
  assert.equal(bad.json.invalid, true);
  const other = await call(server.url, "/v1/tool", { task_id: task.id, name: "drop_tables", arguments: {} });
  assert.match(other.json.content, /unknown tool 'drop_tables'/);
  const byTask = await call(server.url, "/v1/tool", { task_id: task.id, query: QUERIES[0] });
  const byDb = await call(server.url, "/v1/tool", { db: task.db_path, query: QUERIES[0] });
  assert.equal(byDb.json.content, byTask.json.content);
});

test("the prompt endpoint renders the messages and tools the kit's episodes start with", async () => {
  const task = tasks[3];
  const r = await call(server.url, "/v1/prompt", { task_id: task.id });
  const env = defaultEnv({ executor: pool, prompt: service.prompt });
  assert.deepEqual(r.json.messages, await env.opening(task));
  assert.deepEqual(r.json.tools, [sqlToolSpec()]);
  assert.equal(r.json.style, "tool");
  const single = await call(server.url, "/v1/prompt", { task_id: task.id, style: "single" });
  assert.deepEqual(single.json.messages, await defaultEnv({ executor: pool, prompt: { style: "single" } }).opening(task));
  assert.deepEqual(single.json.tools, []);
  const adHoc = await call(server.url, "/v1/prompt", { db: task.db_path, question: task.question, style: "single" });
  assert.equal(adHoc.json.messages[1].content, task.question);
});

test("grading by task id gives what grade() gives; a bad item answers an error and the rest still grade", async () => {
  const items = tasks.slice(0, 10).map((t, i) => ({ task_id: t.id, pred: i % 2 ? "```sql\n" + t.gold_sql + "\n```" : "SELECT 1", preset: "tool-rl" }));
  const r = await call(server.url, "/v1/grade", { items: [...items, { task_id: tasks[0].id }, { pred: "x" }] });
  assert.equal(r.status, 200);
  for (let i = 0; i < items.length; i++) {
    const want = await grade(tasks[i], items[i].pred, { executor: pool, preset: "tool-rl" });
    assert.equal(r.json.results[i].reward, want.reward);
    assert.equal(r.json.results[i].outcome, want.outcome);
    assert.equal(r.json.results[i].reason, want.reason);
  }
  assert.match(r.json.results[10].error, /item 10: field "pred" must be a string/);
  assert.match(r.json.results[11].error, /item 11: field "db" must be a string/);
  const unknown = await call(server.url, "/v1/grade", { items: [{ task_id: "nope", pred: "SELECT 1" }] });
  assert.match(unknown.json.results[0].error, /unknown task_id "nope"/);
});

test("bad bodies, unknown routes and wrong methods get clear 4xx answers", async () => {
  const notJson = await call(server.url, "/v1/grade", undefined, "{items:");
  assert.equal(notJson.status, 400);
  assert.match(notJson.json.error.message, /not valid JSON/);
  const empty = await call(server.url, "/v1/tool", undefined, "");
  assert.equal(empty.status, 400);
  const noItems = await call(server.url, "/v1/grade", { pred: "x" });
  assert.equal(noItems.status, 400);
  assert.match(noItems.json.error.message, /"items"/);
  const noTarget = await call(server.url, "/v1/tool", { query: "SELECT 1" });
  assert.equal(noTarget.status, 400);
  const unknownTask = await call(server.url, "/v1/tool", { task_id: "nope", query: "SELECT 1" });
  assert.equal(unknownTask.status, 404);
  const noDb = await call(server.url, "/v1/tool", { db: "/no/such.sqlite", query: "SELECT 1" });
  assert.equal(noDb.status, 403);
  assert.equal(noDb.json.error.code, "forbidden");
  const badStyle = await call(server.url, "/v1/prompt", { task_id: tasks[0].id, style: "chat" });
  assert.equal(badStyle.status, 400);
  const route = await call(server.url, "/v2/grade", { items: [] });
  assert.equal(route.status, 404);
  const method = await call(server.url, "/v1/grade");
  assert.equal(method.status, 405);
});

test("/health and /metrics report the service's state in Prometheus text", async () => {
  const h = await call(server.url, "/health");
  assert.equal(h.json.status, "ok");
  assert.equal(h.json.tasks, tasks.length);
  const m = await call(server.url, "/metrics");
  assert.equal(m.status, 200);
  assert.match(m.text, /^# HELP t2s_env_requests_total /m);
  assert.match(m.text, /^t2s_env_requests_total\{route="\/v1\/grade",code="200"\} \d+$/m);
  assert.match(m.text, /^t2s_env_grades_total\{outcome="correct"\} \d+$/m);
  assert.match(m.text, /^t2s_env_tool_calls_total\{invalid="true"\} \d+$/m);
  assert.match(m.text, /^t2s_env_gold_cache_misses_total \d+$/m);
  // every sample line is `name{labels} value` or `name value`
  for (const line of m.text.trim().split("\n")) if (!line.startsWith("#")) assert.match(line, /^[a-z][a-z0-9_]*(\{[^}]*\})? [0-9.e+-]+$/, line);
});

test("the shipped verl tool config and the Python tool carry the kit's own tool schema", async () => {
  const { readFileSync } = await import("node:fs");
  const { kitPath } = await import("../../lib/core/paths.js");
  const spec = sqlToolSpec().function;
  const yaml = readFileSync(kitPath("integrations", "python", "verl_tool_config.yaml"), "utf8");
  assert.match(yaml, new RegExp(`name: ${spec.name}\\n`));
  assert.ok(yaml.includes(`description: ${JSON.stringify(spec.description)}`));
  assert.ok(yaml.includes(`description: ${JSON.stringify((spec.parameters as { properties: { query: { description: string } } }).properties.query.description)}`));
  const py = readFileSync(kitPath("integrations", "python", "t2s_tools.py"), "utf8");
  assert.ok(py.includes(JSON.stringify(spec.description)));
  assert.ok(py.includes(JSON.stringify((spec.parameters as { properties: { query: { description: string } } }).properties.query.description)));
  // the URL comes from $T2S_ENV_URL on each worker: a url in the shipped config would override it
  assert.doesNotMatch(yaml, /^\s*url:/m);
});

test("a body over the size limit gets a 413 the client can read", async () => {
  const small = await startEnvServer({ service, port: 0, maxBodyBytes: 1024 });
  try {
    const r = await call(small.url, "/v1/grade", { items: [{ db: "x", gold: "SELECT 1", pred: "x".repeat(5000) }] });
    assert.equal(r.status, 413);
    assert.match(r.json.error.message, /over 1024 bytes/);
  } finally {
    await small.close();
  }
});
