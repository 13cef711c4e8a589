import { test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { ExecutorPool } from "../../lib/db/pool.js";
import { tableColumns } from "../../lib/db/schema.js";
import { probesFor } from "../../lib/recipes/probes.js";
import { buildToolTranscripts, hermesCallText } from "../../lib/recipes/tool-data.js";
import { readTasks } from "../../lib/tasks/io.js";
import { loadTokenizer } from "../../lib/model/tokenizer.js";
import { conversationExample, readConversations } from "../../lib/train/conversations.js";
import { promptIds } from "../../lib/model/chat-prompt.js";
import { couldHelp, goldLiterals, goldNames } from "../../lib/episode/padding.js";
import { HANG_GUARD_MS, runCli, scratchDir } from "../helpers.js";
import { tinyTrainingWorld } from "../train/tiny-world.js";
import { miniTasks } from "./fixture.js";

const shop = "data/shop/shop.sqlite";
const columns = tableColumns(shop);

test("probes: the values of a low-cardinality filter column, a LIKE for a wide one, date ranges, the first join, a count", () => {
  const few = () => 5;
  const gold = "SELECT COUNT(*) FROM orders o JOIN customers c ON c.customer_id = o.customer_id WHERE c.country = 'US' AND strftime('%Y', o.order_date) = '2025'";
  assert.deepEqual(probesFor(gold, columns, few), [
    { kind: "values", sql: "SELECT DISTINCT country FROM customers ORDER BY country" },
    { kind: "date_range", sql: "SELECT MIN(order_date), MAX(order_date) FROM orders" },
    { kind: "join_preview", sql: "SELECT * FROM orders o JOIN customers c ON c.customer_id = o.customer_id LIMIT 3" },
    { kind: "count", sql: "SELECT COUNT(*) FROM orders" },
  ]);
  const many = () => 500;
  assert.deepEqual(probesFor("SELECT price FROM products p WHERE p.name = 'HD Webcam'", columns, many)[0], {
    kind: "matches", sql: "SELECT DISTINCT name FROM products WHERE name LIKE '%Webcam%' ORDER BY name LIMIT 10",
  });
  // a join condition stops at the clause after it, not inside its parentheses
  const p = probesFor("SELECT 1 FROM employees e LEFT JOIN orders o ON o.sales_rep_id = e.employee_id AND strftime('%Y', o.order_date) = '2025' WHERE e.department = 'Sales'", columns, few);
  assert.ok(p.some((x) => x.sql === "SELECT * FROM employees e JOIN orders o ON o.sales_rep_id = e.employee_id AND strftime('%Y', o.order_date) = '2025' LIMIT 3"));
  assert.deepEqual(probesFor("SELECT 1", columns, few), []);
});

test("tool-data: real episodes on the shop database; every transcript commits the gold and is graded correct; deterministic per seed", async () => {
  const tasks = readTasks("data/shop/tasks.jsonl").filter((t) => t.split === "train").slice(0, 40);
  const executor = new ExecutorPool({ workers: 1 });
  try {
    const a = await buildToolTranscripts(tasks, { executor, seed: 3 });
    const b = await buildToolTranscripts(tasks, { executor, seed: 3 });
    assert.deepEqual(a, b);
    assert.equal(a.transcripts.length + Object.values(a.dropped).reduce((x, y) => x + y, 0), tasks.length);
    const tool = a.transcripts.filter((t) => t.style === "tool");
    assert.ok(tool.length >= 20);
    assert.ok(tool.some((t) => t.protocol === "native") && tool.some((t) => t.protocol === "hermes"));
    for (const t of a.transcripts) {
      const task = tasks.find((x) => x.id === t.task_id)!;
      const last = t.messages[t.messages.length - 1];
      assert.equal(last.role, "assistant");
      assert.equal(last.content, "```sql\n" + task.gold_sql.trim() + "\n```");
      if (t.style === "single") assert.equal(t.messages.length, 3);
      if (t.protocol === "native") {
        assert.ok(t.messages.some((m) => m.role === "tool") && t.tools?.length === 1);
        assert.ok(!t.messages.some((m) => m.role === "user" && m.content?.includes("<tool_response>")));
      }
      if (t.protocol === "hermes") {
        const call = t.messages.find((m) => m.role === "assistant")!;
        assert.match(call.content ?? "", /^<tool_call>\n\{"name": "execute_sql_query", "arguments": \{"query": /);
        assert.ok(t.messages.some((m) => m.role === "user" && m.content?.startsWith("<tool_response>\n")));
        assert.equal(t.tools, undefined);
      }
      if (t.probes.includes("draft")) {
        const calls = t.messages.filter((m) => m.role === "assistant").slice(0, -1);
        const lastCall = calls[calls.length - 1];
        const ran = lastCall.tool_calls ? JSON.parse(lastCall.tool_calls[0].function.arguments).query : JSON.parse(/<tool_call>\n([\s\S]*)\n<\/tool_call>/.exec(lastCall.content!)![1]).arguments.query;
        assert.equal(ran, task.gold_sql);
      }
      // no tool result is an error: probes are checked on the database first
      for (const m of t.messages) if (m.role === "tool") assert.doesNotMatch(m.content ?? "", /^error/);
    }
    const c = await buildToolTranscripts(tasks, { executor, seed: 4 });
    assert.notDeepEqual(c.transcripts.map((t) => t.plan), a.transcripts.map((t) => t.plan));
    await assert.rejects(buildToolTranscripts([{ ...tasks[0], split: "holdout" }], { executor, seed: 1 }), /holdout_leak|train tasks only/);
  } finally {
    await executor.close();
  }
});

test("a native transcript and its hermes twin render to the same assistant tokens; SFT trains the assistant turns only", async () => {
  const tok = loadTokenizer("data/models/shop-sql-4m");
  const q = "SELECT DISTINCT status FROM orders ORDER BY status";
  const base = [{ role: "system" as const, content: "S" }, { role: "user" as const, content: "Q" }];
  const native = conversationExample(tok, {
    messages: [...base, { role: "assistant", content: "", tool_calls: [{ id: "c", type: "function", function: { name: "execute_sql_query", arguments: JSON.stringify({ query: q }) } }] }, { role: "tool", tool_call_id: "c", content: "status\npaid" }, { role: "assistant", content: "```sql\nSELECT 1\n```" }],
  });
  const hermes = conversationExample(tok, {
    messages: [...base, { role: "assistant", content: hermesCallText(q) }, { role: "user", content: "<tool_response>\nstatus\npaid\n</tool_response>" }, { role: "assistant", content: "```sql\nSELECT 1\n```" }],
  });
  assert.deepEqual(native, hermes);
  const trained = tok.decode(native.ids.filter((_, i) => native.mask[i] === 1));
  assert.equal(trained, `${hermesCallText(q)}<|im_end|>\`\`\`sql\nSELECT 1\n\`\`\`<|im_end|>`);
});

test("t2s recipe tool-data writes the conversations file and refuses to overwrite it; `conversations` trains with t2s train sft", async () => {
  const dir = scratchDir();
  const out = join(dir, "conv.jsonl");
  const extra = join(dir, "extra.jsonl");
  // the recipes' tiny pets database: short prompts keep the CPU step short
  const tasksFile = miniTasks(dir);
  const holdout = readTasks(tasksFile).find((t) => t.split === "holdout")!;
  writeFileSync(extra, JSON.stringify({ ...holdout, id: "x1", split: "train" }) + "\n");
  const leak = await runCli(["recipe", "tool-data", "--tasks", tasksFile, "--extra-tasks", extra, "--out", out]);
  assert.equal(leak.code, 1);
  assert.match(leak.stderr, /^error \[holdout_leak\]: .*same gold SQL as holdout task/m);
  const r = await runCli(["recipe", "tool-data", "--tasks", tasksFile, "--out", out, "--seed", "2", "--json"]);
  assert.equal(r.code, 0, r.stderr);
  const summary = JSON.parse(r.stdout);
  assert.equal(summary.tasks, 4);
  assert.equal(readFileSync(out, "utf8").trim().split("\n").length, summary.conversations);
  // --pad-share reaches the transcripts: every single-style opening is padded (the one-table pets database
  // has little to pad with; the shop test above checks the turns themselves)
  const padded = await runCli(["recipe", "tool-data", "--tasks", tasksFile, "--out", join(dir, "padded.jsonl"), "--single-share", "1", "--pad-share", "1", "--pad-max", "700", "--json"]);
  assert.equal(padded.code, 0, padded.stderr);
  assert.equal(JSON.parse(padded.stdout).padded, 4);
  for (const line of readFileSync(join(dir, "padded.jsonl"), "utf8").trim().split("\n")) assert.ok(JSON.parse(line).train_from >= 2);
  const again = await runCli(["recipe", "tool-data", "--tasks", tasksFile, "--out", out]);
  assert.equal(again.code, 2);
  assert.match(again.stderr, /exists; pass --force/);
  const cfg = join(dir, "sft.json");
  // one conversation a step, on wasm: the step shows that the file trains. The model is the tiny Qwen2
  // fixture (its chat template renders tools and tool calls as shop-sql-4m's does; the two protocols'
  // tokens are compared on shop-sql-4m's tokenizer above): a step of shop-sql-4m on this conversation
  // costs about four times the CPU and checks nothing more about the file
  const model = join(tinyTrainingWorld("t2s-tool-data-sft-"), "model");
  writeFileSync(cfg, JSON.stringify({ model, full_weights: true, conversations: out, steps: 1, batch_size: 1, micro_batch_rows: 1, lr: 1e-4, seed: 1, output_dir: join(dir, "sft"), backend: "wasm" }));
  const t = await runCli(["train", "sft", "--config", cfg, "--quiet"], { timeoutMs: HANG_GUARD_MS });
  assert.equal(t.code, 0, t.stderr);
  assert.match(t.stdout, new RegExp(`trained 1 steps on ${summary.conversations} conversations`));
});

test("tool-data --pad-share: padded single-style openings stay within their length, never help, and their padding turns are not trained", async () => {
  const tasks = readTasks("data/shop/tasks.jsonl").filter((t) => t.split === "train").slice(0, 12);
  const tok = loadTokenizer("data/models/shop-sql-4m");
  const countTokens = async (m: Parameters<typeof promptIds>[1]) => promptIds(tok, m).length;
  const executor = new ExecutorPool({ workers: 1 });
  try {
    const opts = { executor, seed: 5, singleShare: 1, padding: { share: 1, maxTokens: 900, countTokens } };
    const a = await buildToolTranscripts(tasks, opts);
    assert.deepEqual(await buildToolTranscripts(tasks, opts), a);
    // without padding the same tasks give the same plans and answers: the padding draws come last
    const bare = await buildToolTranscripts(tasks, { executor, seed: 5, singleShare: 1 });
    assert.deepEqual(a.transcripts.map((t) => t.task_id), bare.transcripts.map((t) => t.task_id));
    assert.ok(a.transcripts.some((t) => (t.padding_calls ?? 0) >= 2));
    for (const t of a.transcripts) {
      assert.equal(t.style, "single");
      assert.equal(t.train_from, 2 + 2 * t.padding_calls!);
      const task = tasks.find((x) => x.id === t.task_id)!;
      const names = goldNames(task.gold_sql, columns);
      for (const m of t.messages.slice(2, t.train_from)) {
        const text = m.role === "tool" ? m.content! : m.tool_calls![0].function.arguments;
        assert.ok(!couldHelp(text, names, goldLiterals(task.gold_sql)), text);
      }
      assert.ok((await countTokens(t.messages.slice(0, t.train_from))) <= 900);
      // only the answer is trained: the padding calls before train_from are context
      const row = conversationExample(tok, t);
      assert.equal(tok.decode(row.ids.filter((_, i) => row.mask[i] === 1)), "```sql\n" + task.gold_sql.trim() + "\n```<|im_end|>");
    }
  } finally {
    await executor.close();
  }
});

test("conversations: train_from must name a message with an assistant turn from it", () => {
  const dir = scratchDir();
  const file = join(dir, "c.jsonl");
  const messages = [{ role: "user", content: "Q" }, { role: "assistant", content: "A" }];
  writeFileSync(file, JSON.stringify({ messages, train_from: 2 }) + "\n");
  assert.throws(() => readConversations(file), /"train_from" must be a message index \(0 to 1\), got 2/);
  writeFileSync(file, JSON.stringify({ messages: [...messages, { role: "user", content: "more" }], train_from: 2 }) + "\n");
  assert.throws(() => readConversations(file), /no assistant turn to train on from message 3 \(train_from\)/);
  writeFileSync(file, JSON.stringify({ messages, train_from: 1 }) + "\n");
  assert.deepEqual(readConversations(file)[0].train_from, 1);
});
