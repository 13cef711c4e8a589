import { test } from "node:test";
import assert from "node:assert/strict";
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { assertClose, TinyLM, useCpu } from "./tiny-lm.js";
import { toyGrader, toySampler } from "./toy-task.js";
import { GrpoTrainer, type GrpoOptions, type Sampler } from "../../lib/train/grpo.js";
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
  // the same policy samples and learns here: every ratio is 1 up to float rounding, nothing is clipped
  for (const r of records) {
    for (const k of ["is_ratio_mean", "is_ratio_min", "is_ratio_max"]) assert.ok(Math.abs((r[k] as number) - 1) < 1e-5, `step ${r.step} ${k} ${r[k]}`);
    assert.equal(r.is_clipped_frac, 0);
    assert.ok(Math.abs(r.rollout_kl as number) < 1e-5 && (r.rollout_kl_k3 as number) < 1e-9, `step ${r.step} rollout_kl ${r.rollout_kl} k3 ${r.rollout_kl_k3}`);
  }
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

/** The toy sampler with every sampler log-prob changed by `f` (the tokens drawn stay the same). */
function reported(lm: TinyLM, f: (logp: number, t: number) => number): Sampler<number> {
  const inner = toySampler(lm);
  return async (p, g, ctx) => (await inner(p, g, ctx)).map((group) => group.map((r) => ({ ...r, rows: r.rows.map((row) => ({ ...row, logprobs: row.logprobs?.map(f) })) })));
}

test("a sampler one nat below the learner: TIS truncates every weight at the cap, token_mask drops every token, the log shows the mismatch", async () => {
  const first = async (over: Partial<GrpoOptions>, f: (logp: number, t: number) => number = (x) => x - 1) => {
    const lm = new TinyLM({ vocab: 6, dim: 4, maxLen: 8, seed: 3 });
    const [rec] = await new GrpoTrainer(lm, PROMPTS, reported(lm, f), toyGrader, base({ steps: 1, ...over })).train();
    lm.dispose();
    return rec;
  };
  const off = await first({ importanceSamplingCorrection: false });
  const truncated = await first({});
  const masked = await first({ importanceSamplingMode: "token_mask" });
  assert.ok(Math.abs(off.loss as number) > 1e-3, "the step has a learning signal");
  // ratio exp(old - rollout) = e on every token: over the default cap 2, so each weight is exactly 2
  assertClose(truncated.loss as number, 2 * (off.loss as number), 1e-7, 1e-5, "token_truncate loss = 2 x plain loss");
  assert.equal(masked.loss, 0);
  assert.equal(masked.grad_norm, 0, "every token dropped: no gradient");
  for (const rec of [off, truncated, masked]) {
    assertClose(rec.is_ratio_mean as number, Math.E, 1e-5, 1e-5, "is_ratio_mean");
    assertClose(rec.is_ratio_max as number, Math.E, 1e-5, 1e-5, "is_ratio_max");
    assertClose(rec.rollout_kl as number, -1, 1e-5, 1e-5, "rollout_kl");
    assertClose(rec.rollout_kl_k3 as number, Math.E - 2, 1e-5, 1e-5, "rollout_kl_k3");
    assertClose(rec.sampling_logp_diff_mean as number, 1, 1e-5, 1e-5, "sampling_logp_diff_mean");
  }
  assert.equal(truncated.is_clipped_frac, 1);
  assert.equal(masked.is_clipped_frac, 1);
  assert.equal(off.is_clipped_frac, undefined, "no clipped fraction when the correction is off");
  // a cap above e leaves the plain ratio e as the weight
  assertClose((await first({ importanceSamplingCap: 3 })).loss as number, Math.E * (off.loss as number), 1e-6, 1e-5, "cap 3");
  // with mu = 2 the weights come from the old log-probs computed before the passes
  assertClose((await first({ mu: 2 })).loss as number, 2 * ((await first({ mu: 2, importanceSamplingCorrection: false })).loss as number), 1e-7, 1e-5, "mu 2");
  // tokens without a sampler log-prob keep weight 1; a sampler that reports none changes nothing
  const partial = await first({}, (x, t) => (t % 2 ? NaN : x - 1));
  assert.ok(Number.isFinite(partial.loss) && Number.isFinite(partial.grad_norm), `loss ${partial.loss}`);
  assert.equal(partial.is_clipped_frac, 1, "every compared token is over the cap");
  const none = await first({}, () => NaN);
  assert.equal(none.loss, off.loss);
  assert.equal(none.is_ratio_mean, undefined, "no sampler log-probs, no mismatch figures");
  await assert.rejects(first({ importanceSamplingCap: 0.5 }), /importanceSamplingCap must be >= 1/);
});
