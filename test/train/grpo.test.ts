import { test } from "node:test";
import assert from "node:assert/strict";
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { TinyLM, useCpu } from "./tiny-lm.js";
import { toyGrader, toySampler } from "./toy-task.js";
import { GrpoTrainer, type GrpoOptions } from "../../lib/train/grpo.js";
import { scratchDir } from "../helpers.js";

await useCpu();

const PROMPTS = [1, 2, 3, 4, 5];
const base = (over: Partial<GrpoOptions> = {}): GrpoOptions => ({
  steps: 4, promptsPerStep: 4, groupSize: 8, lossType: "dapo", lr: 0.05, schedule: "constant", maxCompletionLength: 4,
  maxGradNorm: 1, seed: 42, onWarning: () => {}, ...over,
});

test("GRPO on a toy verifier task raises the mean reward (fixed seed)", async () => {
  const lm = new TinyLM({ vocab: 6, dim: 8, maxLen: 8, seed: 5 });
  const records: Array<Record<string, unknown>> = [];
  const trainer = new GrpoTrainer(lm, PROMPTS, toySampler(lm), toyGrader, base({ steps: 30, lr: 0.08, maskTruncated: true, onStep: (r) => records.push(r) }));
  await trainer.train();
  const reward = records.map((r) => r.reward_mean as number);
  const first = (reward[0] + reward[1] + reward[2]) / 3;
  const last = (reward[27] + reward[28] + reward[29]) / 3;
  assert.ok(first > 0, "the base policy sometimes earns reward");
  assert.ok(last > first + 0.3, `mean reward should rise clearly: first steps ${first.toFixed(3)}, last steps ${last.toFixed(3)}`);
  for (const k of ["reward_std", "correct_rate", "frac_reward_zero_std", "kl", "entropy", "clip_ratio_low", "clip_ratio_high", "clip_ratio_region", "completion_length_mean", "truncated_rate", "tokens_per_s", "step_time_s", "lr", "loss", "grad_norm"]) {
    assert.equal(typeof records[0][k], "number", `log field ${k}`);
  }
  assert.ok((records[0].sampling_logp_diff_max as number) < 1e-4, `trainer and sampler log-probs agree: ${records[0].sampling_logp_diff_max}`);
  trainer.dispose();
  lm.dispose();
});

test("resume continues exactly: same next-step loss as an uninterrupted run", async () => {
  const mk = () => new TinyLM({ vocab: 6, dim: 4, maxLen: 8, seed: 9 });
  const opts = base({ lossType: "grpo", mu: 2, beta: 0.05, schedule: "cosine", warmupSteps: 1, checkpointEvery: 2 });
  const lmA = mk();
  const a = new GrpoTrainer(lmA, PROMPTS, toySampler(lmA), toyGrader, opts);
  const recA = await a.train();

  const out = scratchDir();
  const lmB = mk();
  const b = new GrpoTrainer(lmB, PROMPTS, toySampler(lmB), toyGrader, { ...opts, outDir: out });
  await b.step();
  await b.step(); // checkpoint at step 2, then the "crash"
  assert.ok(existsSync(join(out, "checkpoints", "step-000002", "trainable.safetensors")));
  b.dispose();

  const lmC = mk();
  const c = new GrpoTrainer(lmC, PROMPTS, toySampler(lmC), toyGrader, { ...opts, outDir: out });
  assert.equal(c.resume(), 2);
  const recC = await c.train();
  assert.equal(recC.length, 2);
  for (let k = 0; k < 2; k++) {
    for (const f of ["loss", "reward_mean", "loss_last_pass", "kl", "lr"]) assert.equal(recC[k][f], recA[k + 2][f], `step ${k + 2} ${f}`);
  }
  const log = readFileSync(join(out, "train_log.jsonl"), "utf8").trim().split("\n").map((l) => JSON.parse(l).step);
  assert.deepEqual(log, [0, 1, 2, 3]);
  for (const t of [a, c]) t.dispose();
  for (const m of [lmA, lmB, lmC]) m.dispose();
});

test("a solved band warns through frac_reward_zero_std", async () => {
  const lm = new TinyLM({ vocab: 6, dim: 4, maxLen: 8, seed: 1 });
  const warnings: string[] = [];
  const t = new GrpoTrainer(lm, PROMPTS, toySampler(lm), async () => ({ reward: 1, correct: true }), base({ steps: 1, onWarning: (m) => warnings.push(m) }));
  const [rec] = await t.train();
  assert.equal(rec.frac_reward_zero_std, 1);
  assert.equal(rec.grad_norm, 0, "no advantage, no gradient");
  assert.match(warnings[0], /no learning signal/);
  t.dispose();
  lm.dispose();
});

test("micro-batches respect the tensor cap and give the same update as one batch", async () => {
  const run = async (cap: number) => {
    const lm = new TinyLM({ vocab: 6, dim: 4, maxLen: 8, seed: 2 });
    const recs = await new GrpoTrainer(lm, PROMPTS, toySampler(lm), toyGrader, base({ steps: 2, maxTensorElements: cap })).train();
    lm.dispose();
    return recs;
  };
  const one = await run(2 ** 20);
  const many = await run(6 * 4 * 3); // at most 3 rows of 4 positions x 6 vocab
  assert.equal(one[0].micro_batches, 1);
  assert.ok((many[0].micro_batches as number) >= 11);
  assert.ok(Math.abs((one[1].loss as number) - (many[1].loss as number)) < 1e-5, `${one[1].loss} vs ${many[1].loss}`);
});

test("mask_truncated drops truncated episodes from the loss but keeps their rewards in the statistics", async () => {
  const run = async (maskTruncated: boolean) => {
    const lm = new TinyLM({ vocab: 6, dim: 4, maxLen: 8, seed: 2 });
    const [rec] = await new GrpoTrainer(lm, PROMPTS, toySampler(lm), toyGrader, base({ steps: 1, maskTruncated })).train();
    lm.dispose();
    return rec;
  };
  const kept = await run(false);
  const masked = await run(true);
  assert.ok((kept.truncated_rate as number) > 0 && (kept.truncated_rate as number) < 1, "the seed gives some truncated samples");
  assert.equal(kept.reward_mean, masked.reward_mean, "rewards of truncated samples still count");
  // every toy rollout scores its 4 generated tokens (or fewer when EOS came early); truncated ones have 4
  const truncatedTokens = Math.round((kept.truncated_rate as number) * (kept.samples as number)) * 4;
  assert.equal(masked.trained_tokens, (kept.trained_tokens as number) - truncatedTokens);
});
