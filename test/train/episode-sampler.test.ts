import { test } from "node:test";
import assert from "node:assert/strict";
import { resolve } from "node:path";
import { useCpu } from "./tiny-lm.js";
import { loadModel } from "../../lib/model/load.js";
import { ModelPolicy } from "../../lib/train/episode-sampler.js";
import type { ChatMessage } from "../../lib/policy/types.js";

await useCpu();

const msgs = (q: string): ChatMessage[] => [{ role: "user", content: q }];

test("concurrent turns are batched, recorded as prompt (masked) + generated ids, and fixed by their seeds", async () => {
  const model = await loadModel(resolve("test/fixtures/model/qwen2"), { backend: "cpu" });
  const policy = new ModelPolicy(model, { adapter: null, temperature: 1, topP: 1 });
  const a = policy.recording();
  const b = policy.recording();
  const [ra, rb] = await Promise.all([a.complete(msgs("count pets"), { max_tokens: 5, seed: 11 }), b.complete(msgs("name of pet two?"), { max_tokens: 5, seed: 12 })]);
  assert.equal(a.rows.length, 1);
  const row = a.rows[0];
  const prompt = policy.promptIds(msgs("count pets"));
  assert.deepEqual(row.ids.slice(0, prompt.length), prompt);
  assert.equal(row.ids.length, prompt.length + ra[0].tokens_out);
  assert.deepEqual(row.mask, row.ids.map((_, i) => (i < prompt.length ? 0 : 1)));
  assert.equal(row.logprobs!.filter((x) => Number.isFinite(x)).length, ra[0].tokens_out);
  // the same request alone gives the same tokens: the batch it lands in does not matter
  const alone = policy.recording();
  const again = await alone.complete(msgs("name of pet two?"), { max_tokens: 5, seed: 12 });
  assert.deepEqual(alone.rows[0].ids, b.rows[0].ids);
  assert.equal(again[0].text, rb[0].text);
  model.dispose();
});
