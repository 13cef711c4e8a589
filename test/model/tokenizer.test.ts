import { test } from "node:test";
import assert from "node:assert/strict";
import { mkdirSync, writeFileSync, copyFileSync } from "node:fs";
import { join } from "node:path";
import { loadTokenizer } from "../../lib/model/tokenizer.js";
import { isT2sError } from "../../lib/core/errors.js";
import { scratchDir } from "../helpers.js";
import { fixtureDir, readReference } from "./fixtures.js";

interface TokRef {
  texts: { text: string; ids: number[] }[];
  decode: { ids: number[]; text: string; skip_special: string }[];
  chats: { messages: never[]; tools: unknown[] | null; text: string; ids: number[] }[];
}
const ref = readReference<TokRef>("tokenizer");

test("token ids and decoding match transformers", () => {
  const tok = loadTokenizer(fixtureDir("tokenizer"));
  for (const t of ref.texts) assert.deepEqual(tok.encode(t.text), t.ids, JSON.stringify(t.text));
  for (const d of ref.decode) {
    assert.equal(tok.decode(d.ids), d.text);
    assert.equal(tok.decode(d.ids, { skipSpecialTokens: true }), d.skip_special);
  }
  assert.deepEqual(tok.eosIds, [2]);
  assert.equal(tok.padId, 0);
});

for (const dir of ["tokenizer", "qwen3"]) {
  test(`chat template text (with tools and tool calls) matches transformers: ${dir}`, () => {
    const tok = loadTokenizer(fixtureDir(dir));
    assert.ok(tok.hasChatTemplate);
    for (const c of ref.chats) {
      const text = tok.applyChatTemplate(c.messages, { tools: c.tools ?? undefined });
      assert.equal(text, c.text);
      assert.deepEqual(tok.encode(text, { addSpecialTokens: false }), c.ids);
    }
  });
}

test("a folder without tokenizer.json or a template gives clear errors", () => {
  const dir = scratchDir();
  assert.throws(() => loadTokenizer(dir), (e) => isT2sError(e, "missing_file") && /tokenizer\.json/.test(e.message));
  const d2 = join(dir, "nt");
  mkdirSync(d2);
  copyFileSync(join(fixtureDir("tokenizer"), "tokenizer.json"), join(d2, "tokenizer.json"));
  writeFileSync(join(d2, "tokenizer_config.json"), JSON.stringify({ eos_token: "<|im_end|>" }));
  const tok = loadTokenizer(d2);
  assert.equal(tok.hasChatTemplate, false);
  assert.throws(() => tok.applyChatTemplate([{ role: "user", content: "hi" }]), (e) => isT2sError(e, "no_chat_template"));
});
