import { test } from "node:test";
import assert from "node:assert/strict";
import { ExecutorPool } from "../../lib/db/pool.js";
import { tableColumns } from "../../lib/db/schema.js";
import { couldHelp, goldLiterals, goldNames, padOpening, paddingQueries } from "../../lib/episode/padding.js";
import { openingMessages } from "../../lib/episode/prompt.js";
import { SQL_TOOL_NAME } from "../../lib/episode/tools.js";
import { formatToolResult } from "../../lib/episode/truncate.js";
import { promptIds } from "../../lib/model/chat-prompt.js";
import { loadTokenizer } from "../../lib/model/tokenizer.js";
import { schemaDdl } from "../../lib/db/schema.js";
import type { ChatMessage } from "../../lib/policy/types.js";
import { TOOL_CHARS, TOOL_ROWS, QUERY_TIMEOUT_MS } from "../../lib/core/defaults.js";

const shop = "data/shop/shop.sqlite";
const columns = tableColumns(shop);
const tok = loadTokenizer("data/models/shop-sql-4m-tool");
/** Prompt tokens as the shipped model's chat template and tokenizer make them (what the tfjs policy counts). */
const countTokens = async (messages: ChatMessage[]) => promptIds(tok, messages).length;

const GOLD = "SELECT c.country, COUNT(*) AS n FROM orders o JOIN customers c ON c.customer_id = o.customer_id WHERE o.status = 'delivered' AND strftime('%Y', o.order_date) = '2025' GROUP BY c.country";
const opening = openingMessages({ style: "single" }, schemaDdl(shop), undefined, "How many delivered 2025 orders per customer country?");
const toolOutput = { maxRows: TOOL_ROWS, maxChars: TOOL_CHARS, mode: "middle" as const };

function withPool<T>(fn: (run: (q: string) => ReturnType<ExecutorPool["execute"]>, ran: string[]) => Promise<T>): Promise<T> {
  const pool = new ExecutorPool({ workers: 1 });
  const ran: string[] = [];
  const run = (q: string) => {
    ran.push(q);
    return pool.execute(shop, q, { maxRows: TOOL_ROWS, timeoutMs: QUERY_TIMEOUT_MS });
  };
  return fn(run, ran).finally(() => pool.close());
}

/** The padding's call/result pairs (after the opening), as [query, shown result]. */
function pairs(messages: ChatMessage[]): Array<[string, string]> {
  const out: Array<[string, string]> = [];
  const added = messages.slice(opening.length);
  for (let i = 0; i < added.length; i += 2) {
    const call = added[i];
    const result = added[i + 1];
    assert.equal(call.role, "assistant");
    assert.equal(call.content, "");
    assert.equal(call.tool_calls?.length, 1);
    assert.equal(call.tool_calls![0].function.name, SQL_TOOL_NAME);
    assert.equal(result.role, "tool");
    assert.equal(result.tool_call_id, call.tool_calls![0].id);
    out.push([JSON.parse(call.tool_calls![0].function.arguments).query, result.content ?? ""]);
  }
  return out;
}

test("the gold query's names and literals: tables, columns and aliases it mentions; string literals split at LIKE wildcards", () => {
  assert.deepEqual([...goldNames(GOLD, columns)].sort(), ["country", "customer_id", "customers", "order_date", "orders", "status"]);
  assert.deepEqual(goldLiterals("SELECT name FROM products WHERE name LIKE '%Webcam%' AND sku = 'KIT-0012' AND x = 'a'"), ["webcam", "kit-0012"]);
  assert.equal(couldHelp("status\ndelivered", new Set(["status"]), []), true);
  assert.equal(couldHelp("order_status", new Set(["status"]), []), false);
  assert.equal(couldHelp("method\ncard\nKIT-0012x", new Set(), ["kit-0012"]), false);
  assert.equal(couldHelp("sku\nKIT-0012", new Set(), ["kit-0012"]), true);
});

test("padding reaches about the target with real tool turns: each query ran read-only on the database and shows its real result", async () => {
  await withPool(async (run, ran) => {
    const before = await countTokens(opening);
    for (const target of [1000, 1848]) {
      const p = await padOpening(opening, GOLD, columns, { runTool: run, countTokens }, { tokens: target, seed: 7, toolOutput });
      assert.equal(p.tokens, await countTokens(p.messages), "the reported count is the prompt's real count");
      assert.ok(p.tokens <= target, `${p.tokens} <= ${target}`);
      // within a small turn of the target: the fill tries smaller turns once a big one does not fit
      assert.ok(p.tokens >= target - 60, `${p.tokens} reaches about ${target} (unpadded ${before})`);
      assert.deepEqual(p.messages.slice(0, opening.length), opening, "the opening is kept as it was, padding after the question");
      const turns = pairs(p.messages);
      assert.equal(turns.length, p.calls);
      assert.ok(p.calls >= 3);
      for (const [query, shown] of turns) {
        assert.ok(ran.includes(query), `${query} was run`);
        // run again on the read-only sandbox: the same result, rendered as an episode renders it
        const again = await run(query);
        assert.equal(again.ok, true, query);
        assert.equal(shown, formatToolResult(again, toolOutput));
        // the whole result, as the query returned it: nothing cut by the tool's row or character caps
        assert.doesNotMatch(shown, /\.\.\.\(truncated\)\.\.\.|only the first/);
        assert.match(query, /^SELECT /);
      }
    }
  });
});

test("padding never helps: no table or column the gold query names, none of its literals, in any query or shown result", async () => {
  await withPool(async (run) => {
    const names = goldNames(GOLD, columns);
    const p = await padOpening(opening, GOLD, columns, { runTool: run, countTokens }, { tokens: 1848, seed: 3, toolOutput });
    const turns = pairs(p.messages);
    assert.ok(turns.length > 0);
    for (const [query, shown] of turns) {
      const table = /FROM (\w+)/.exec(query)![1];
      assert.ok(!["orders", "customers"].includes(table), `${query} reads a table the gold query uses`);
      for (const word of `${query}\n${shown}`.toLowerCase().split(/[^a-z0-9_]+/)) assert.ok(!names.has(word), `${query} shows '${word}'`);
      assert.doesNotMatch(shown, /\bdelivered\b/i);
      assert.doesNotMatch(shown, /\b2025\b/);
    }
    // every candidate obeys the rule before it is even run
    for (const q of paddingQueries(GOLD, columns, 3)) assert.equal(couldHelp(q, names, goldLiterals(GOLD)), false, q);
  });
});

test("padding is deterministic per seed; another seed picks other turns; an opening already at the target is left alone", async () => {
  await withPool(async (run) => {
    const pad = (seed: number, tokens = 1000) => padOpening(opening, GOLD, columns, { runTool: run, countTokens }, { tokens, seed, toolOutput });
    const a = await pad(11);
    const b = await pad(11);
    const c = await pad(12);
    assert.deepEqual(a, b);
    assert.notDeepEqual(pairs(a.messages), pairs(c.messages));
    assert.deepEqual(paddingQueries(GOLD, columns, 11), paddingQueries(GOLD, columns, 11));
    const none = await pad(11, 0);
    assert.deepEqual(none, { messages: opening, calls: 0, tokens: await countTokens(opening) });
  });
});

test("padding goes after the question: an opening that does not end with the user's turn is refused", async () => {
  await assert.rejects(
    padOpening(opening.slice(0, 1), GOLD, columns, { runTool: async () => ({ ok: true, columns: [], rows: [], elapsedMs: 0, truncated: false }), countTokens }, { tokens: 500, seed: 0 }),
    /must end with a user message/,
  );
});
