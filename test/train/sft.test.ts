import { test } from "node:test";
import assert from "node:assert/strict";
import { TinyLM, useCpu } from "./tiny-lm.js";
import { SftTrainer, type SftOptions } from "../../lib/train/sft.js";
import type { TokenRow } from "../../lib/train/batching.js";
import { scratchDir } from "../helpers.js";

await useCpu();

// prompt tokens (masked) then a completion the model must learn: p -> p+1, p+2, EOS
const examples: TokenRow[] = [1, 2, 3, 4].map((p) => ({ ids: [5, p, ((p % 4) + 1), (((p + 1) % 4) + 1), 0], mask: [0, 0, 1, 1, 1] }));
const opts = (over: Partial<SftOptions> = {}): SftOptions => ({ batchSize: 3, epochs: 8, lr: 0.1, schedule: "cosine", warmupSteps: 2, maxGradNorm: 1, seed: 3, ...over });

test("SFT lowers the completion loss", async () => {
  const lm = new TinyLM({ vocab: 6, dim: 8, maxLen: 8, seed: 4 });
  const t = new SftTrainer(lm, examples, opts());
  const recs = await t.train();
  assert.equal(recs.length, 16, "2 steps per epoch x 8 epochs");
  const first = recs[0].loss as number;
  const last = recs[recs.length - 1].loss as number;
  assert.ok(last < first * 0.5, `loss ${first} -> ${last}`);
  t.dispose();
  lm.dispose();
});

test("prompt tokens are not trained on: changing them does not change the loss target count", async () => {
  const lm = new TinyLM({ vocab: 6, dim: 4, maxLen: 8, seed: 4 });
  const t = new SftTrainer(lm, examples, opts({ steps: 1, batchSize: 4 }));
  const [rec] = await t.train();
  assert.equal(rec.trained_tokens, 12, "3 completion tokens x 4 examples");
  t.dispose();
  lm.dispose();
});

test("SFT resume gives the same next-step loss as an uninterrupted run", async () => {
  const a = new TinyLM({ vocab: 6, dim: 4, maxLen: 8, seed: 8 });
  const ta = new SftTrainer(a, examples, opts({ steps: 4 }));
  const ra = await ta.train();
  const out = scratchDir();
  const b = new TinyLM({ vocab: 6, dim: 4, maxLen: 8, seed: 8 });
  const tb = new SftTrainer(b, examples, opts({ steps: 4, outDir: out, checkpointEvery: 3 }));
  for (let i = 0; i < 3; i++) await tb.step();
  const c = new TinyLM({ vocab: 6, dim: 4, maxLen: 8, seed: 8 });
  const tc = new SftTrainer(c, examples, opts({ steps: 4, outDir: out }));
  assert.equal(tc.resume(), 3);
  const [rc] = await tc.train();
  assert.equal(rc.loss, ra[3].loss);
  for (const t of [ta, tb, tc]) t.dispose();
  for (const m of [a, b, c]) m.dispose();
});
