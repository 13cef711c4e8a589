import { test } from "node:test";
import assert from "node:assert/strict";
import { join } from "node:path";
import { readTasks } from "../../lib/tasks/io.js";
import { byteAlphabet, pretokenCounts, TEXT_PRETOKENIZER, trainBpe } from "../../lib/recipes/bpe.js";
import { buildTokenizer, replyText, tokenizerCorpus } from "../../lib/recipes/tokenizer.js";
import { loadTokenizer } from "../../lib/model/tokenizer.js";
import { openingMessages } from "../../lib/episode/prompt.js";
import { scratchDir, repoRoot } from "../helpers.js";

const shop = readTasks(join(repoRoot, "data/shop/tasks.jsonl"));
const trainSample = shop.filter((t) => t.split === "train").slice(0, 120);
const holdoutSample = shop.filter((t) => t.split === "holdout").slice(0, 40);
const ddl = "CREATE TABLE customers (\n  customer_id INTEGER PRIMARY KEY,\n  country TEXT NOT NULL -- e.g. 'DE'\n);";

test("byte alphabet maps 256 bytes to distinct printable characters", () => {
  const a = byteAlphabet();
  assert.equal(new Set(a).size, 256);
  assert.equal(a[32], "\u0120");
  assert.equal(a[65], "A");
});

test("pre-tokens isolate quotes and digits so literals split the same in questions and SQL", () => {
  const c = pretokenCounts([{ text: "from 'US' in 2025\n" }, { text: "country = 'US'" }], TEXT_PRETOKENIZER);
  assert.equal(c.get("'"), 4);
  assert.equal(c.get("US"), 2);
  assert.equal(c.get("2"), 2);
  assert.equal(c.get("from "), 1);
});

test("training is deterministic, respects the vocabulary size and the token length cap", () => {
  const corpus = tokenizerCorpus(trainSample, ddl, "NOTES: none");
  const opts = { vocabSize: 700, specialTokens: ["<|endoftext|>", "<|im_start|>", "<|im_end|>"], addedTokens: ["<tool_call>", "</tool_call>"], maxTokenBytes: 8 };
  const a = trainBpe(corpus, opts);
  const b = trainBpe(corpus, opts);
  assert.deepEqual(a.merges, b.merges);
  assert.equal(a.vocab.size, 700);
  assert.equal(a.vocab.get("<|endoftext|>"), 0);
  assert.equal(a.vocab.get("</tool_call>"), 699);
  const bytes = new Map([...byteAlphabet()].map((ch, i) => [ch, i]));
  for (const [l, r] of a.merges) assert.ok([...(l + r)].every((ch) => bytes.has(ch)) && [...(l + r)].length <= 8, `${l}+${r} over the cap`);
});

test("the corpus holds no holdout question", () => {
  const corpus = tokenizerCorpus([...trainSample, ...holdoutSample], ddl, undefined);
  const texts = new Set(corpus.map((c) => c.text));
  for (const t of holdoutSample) assert.ok(!texts.has(t.question.trim()), t.question);
  assert.throws(() => tokenizerCorpus(holdoutSample, ddl, undefined), /train-split/);
});

test("tokenizer.json loads in lib/model and round-trips questions, golds and chats; template renders ChatML with tools", () => {
  const dir = scratchDir("t2s-bpe-");
  buildTokenizer(dir, tokenizerCorpus(trainSample, ddl, "NOTES"), { vocabSize: 1024 });
  const tok = loadTokenizer(dir);
  assert.equal(tok.vocabSize, 1024);
  assert.deepEqual(tok.eosIds, [2]);
  assert.equal(tok.padId, 0);
  for (const t of [...trainSample.slice(0, 40), ...holdoutSample]) {
    for (const text of [t.question, t.gold_sql, replyText(t.gold_sql)]) {
      const ids = tok.encode(text, { addSpecialTokens: false });
      assert.equal(tok.decode(ids), text);
    }
  }
  const msgs = openingMessages({ style: "single" }, ddl, undefined, holdoutSample[0].question);
  const chat = tok.applyChatTemplate([...msgs, { role: "assistant", content: replyText(holdoutSample[0].gold_sql) }], { addGenerationPrompt: false });
  assert.ok(chat.startsWith("<|im_start|>system\nYou write SQLite"));
  assert.ok(chat.endsWith("```<|im_end|>\n"));
  const ids = tok.encode(chat, { addSpecialTokens: false });
  assert.equal(ids[0], 1);
  assert.equal(tok.decode(ids, { skipSpecialTokens: false }), chat);
  const withTools = tok.applyChatTemplate([{ role: "user", content: "hi" }], { tools: [{ type: "function", function: { name: "run_sql", parameters: {} } }] });
  assert.match(withTools, /^<\|im_start\|>system\n\n\n# Tools[\s\S]*"run_sql"[\s\S]*<\/tools>[\s\S]*<\|im_end\|>\n<\|im_start\|>user\nhi<\|im_end\|>\n<\|im_start\|>assistant\n$/);
  const call = tok.applyChatTemplate(
    [{ role: "user", content: "q" }, { role: "assistant", content: null, tool_calls: [{ type: "function", function: { name: "run_sql", arguments: { query: "SELECT 1" } } }] }, { role: "tool", content: "1", tool_call_id: "a" }],
    { addGenerationPrompt: true },
  );
  assert.ok(call.includes('<|im_start|>assistant\n<tool_call>\n{"name": "run_sql", "arguments": {"query": "SELECT 1"}}\n</tool_call><|im_end|>\n<|im_start|>user\n<tool_response>\n1\n</tool_response><|im_end|>\n'), call);
  const tc = tok.encode("<tool_call>", { addSpecialTokens: false });
  assert.equal(tc.length, 1);
});
