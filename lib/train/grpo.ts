/**
 * The GRPO step driver. Each step: draw P prompts (seeded), sample G completions per prompt through the
 * injected sampler (the real episode loop in the kit), grade them with the injected grader, compute
 * group advantages, then run `mu` optimisation passes over the batch (one optimizer update per pass,
 * gradients accumulated over micro-batches), with the old log-probs recomputed by the trainer.
 */
import { tf } from "../backend/tf.js";
import { T2sError } from "../core/errors.js";
import { groupAdvantages, type AdvantageScale } from "./advantages.js";
import { batchTensors, planMicroBatches, type TokenRow } from "./batching.js";
import { TrainerCore, type OptimOptions, type RunOptions } from "./core.js";
import type { TrainableLM } from "./lm.js";
import { scoredWidth, sequenceLogprobs } from "./logprobs.js";
import { policyLoss, type LossSettings, type LossType, type StepCounts } from "./losses.js";
import { mismatchMetrics, type ImportanceSamplingMode } from "./rollout-correction.js";
import { SeededRandom } from "../core/random.js";
import { defaultOf } from "./settings.js";

/**
 * One sampled episode as the trainer sees it: one token row per model call (the prompt that call saw,
 * then the tokens it generated, masked in). A multi-turn episode has a row per assistant turn, so every
 * row holds exactly the ids the sampler scored, with no re-tokenisation of earlier turns.
 */
export interface Rollout {
  rows: TokenRow[];
  /** Cut by a token budget (finish reason "length"). */
  truncated: boolean;
  /** Anything the grader needs (reply text, finish reason, turns...). */
  info?: unknown;
}

/** Samples `groupSize` rollouts for each prompt with the current weights; deterministic given `seed`. */
/** `ctx.log`: figures of the sampling the sampler adds to the step's train-log record (e.g. prefix_cache_hit_rate). */
export type Sampler<P> = (prompts: P[], groupSize: number, ctx: { seed: number; step: number; log?: Record<string, number> }) => Promise<Rollout[][]>;
/** Grades one rollout: the training reward and whether it is correct. */
export type Grader<P> = (prompt: P, rollout: Rollout) => Promise<{ reward: number; correct: boolean }>;

export interface GrpoOptions extends OptimOptions, RunOptions {
  steps: number;
  /** Prompts per step (P) and samples per prompt (G). */
  promptsPerStep: number;
  groupSize: number;
  lossType?: LossType;
  epsilonLow?: number;
  /** For cispo the absolute weight cap. */
  epsilonHigh?: number;
  beta?: number;
  scale?: AdvantageScale;
  /** Optimisation passes over each generated batch (mu); old log-probs are recomputed when > 1. */
  mu?: number;
  /** Leave truncated samples out of the loss (their rewards still count in the group statistics). */
  maskTruncated?: boolean;
  /** Sampling temperature: logits are divided by it before the log-softmax, as when sampling. */
  temperature?: number;
  /**
   * Weight each token's policy-gradient loss by the detached ratio of the learner's log-prob before the
   * update to the sampler's (TRL's vllm_importance_sampling_correction); tokens the sampler reported no
   * log-prob for keep weight 1.
   */
  importanceSamplingCorrection?: boolean;
  /** token_truncate: min(ratio, cap) (TIS); token_mask: tokens whose ratio exceeds the cap get weight 0. */
  importanceSamplingMode?: ImportanceSamplingMode;
  importanceSamplingCap?: number;
  /** Completion token budget (dr_grpo's normaliser). */
  maxCompletionLength: number;
  /** Cap on B x T x width of one micro-batch's scored tensor (logprobs.ts scoredWidth). */
  maxTensorElements?: number;
  maxMicroBatchRows?: number;
  seed: number;
  /** Warn when frac_reward_zero_std exceeds 0.5 in the first this-many steps (default 3). */
  zeroStdWarnSteps?: number;
  /** Run every `evalEvery` steps (and after the last); its numbers join that step's log record as eval_*. */
  evalEvery?: number;
  onEval?: (step: number) => Promise<Record<string, number>>;
}

/** The options a GrpoOptions may leave out; each absent one takes the training settings table's default. */
type Defaulted =
  | "lossType" | "epsilonLow" | "epsilonHigh" | "beta" | "scale" | "mu" | "temperature" | "maxTensorElements"
  | "importanceSamplingCorrection" | "importanceSamplingMode" | "importanceSamplingCap";

/**
 * The options with every absent one filled from lib/train/settings.ts, as a config file is filled, so the
 * library API and `t2s train grpo` share one set of defaults.
 */
export function grpoDefaults(o: GrpoOptions): GrpoOptions & Required<Pick<GrpoOptions, Defaulted>> {
  const lossType = o.lossType ?? (defaultOf("loss_type", "grpo") as LossType);
  return {
    ...o,
    lossType,
    epsilonLow: o.epsilonLow ?? (defaultOf("epsilon_low", "grpo") as number),
    epsilonHigh: o.epsilonHigh ?? (defaultOf("epsilon_high", "grpo", { loss_type: lossType }) as number),
    beta: o.beta ?? (defaultOf("beta", "grpo") as number),
    scale: o.scale ?? (defaultOf("scale_rewards", "grpo") as AdvantageScale),
    mu: o.mu ?? (defaultOf("mu", "grpo") as number),
    temperature: o.temperature ?? (defaultOf("sampling.temperature", "grpo") as number),
    maxTensorElements: o.maxTensorElements ?? (defaultOf("max_tensor_elements", "grpo") as number),
    importanceSamplingCorrection: o.importanceSamplingCorrection ?? (defaultOf("vllm_importance_sampling_correction", "grpo") as boolean),
    importanceSamplingMode: o.importanceSamplingMode ?? (defaultOf("vllm_importance_sampling_mode", "grpo") as ImportanceSamplingMode),
    importanceSamplingCap: o.importanceSamplingCap ?? (defaultOf("vllm_importance_sampling_cap", "grpo") as number),
  };
}

export class GrpoTrainer<P> {
  readonly core: TrainerCore;
  private readonly dataRng: SeededRandom;
  private readonly sampleRng: SeededRandom;
  private readonly settings: LossSettings;
  /** The options with the table's defaults filled in. */
  readonly opts: ReturnType<typeof grpoDefaults>;

  constructor(readonly lm: TrainableLM, readonly prompts: P[], readonly sampler: Sampler<P>, readonly grader: Grader<P>, options: GrpoOptions) {
    if (prompts.length === 0) throw new T2sError("no_prompts", "no prompts to train on (is the band empty?)");
    if (options.groupSize < 2) throw new T2sError("bad_config", "groupSize (G) must be at least 2: advantages compare samples within a group");
    const opts = (this.opts = grpoDefaults(options));
    if (!(opts.importanceSamplingCap >= 1)) throw new T2sError("bad_config", `importanceSamplingCap must be >= 1 (a ratio of 1 is no mismatch), got ${opts.importanceSamplingCap}`);
    this.settings = {
      lossType: opts.lossType, epsilonLow: opts.epsilonLow, epsilonHigh: opts.epsilonHigh, beta: opts.beta,
      rolloutCorrection: opts.importanceSamplingCorrection ? { mode: opts.importanceSamplingMode, cap: opts.importanceSamplingCap } : null,
    };
    if (this.settings.beta > 0 && !lm.hasReference) throw new T2sError("no_reference", "beta > 0 needs a reference policy, and this model has none (train an adapter, or set beta 0)");
    this.core = new TrainerCore(lm, opts, opts.steps * opts.mu, opts);
    this.dataRng = new SeededRandom(opts.seed);
    this.sampleRng = new SeededRandom((opts.seed ^ 0x5bd1e995) >>> 0);
  }

  /** Continues from the newest checkpoint in the output folder (or `dir`); returns the step it resumes at. */
  resume(dir?: string): number {
    const s = this.core.resume(dir);
    if (!s) return 0;
    if (s.rng.data === undefined || s.rng.sample === undefined) throw new T2sError("bad_checkpoint", "checkpoint has no GRPO RNG state (was it written by SFT?)");
    this.dataRng.setState(s.rng.data);
    this.sampleRng.setState(s.rng.sample);
    return s.step;
  }

  /** Runs steps until `opts.steps`, checkpointing as configured; returns the log records. */
  async train(): Promise<Array<Record<string, unknown>>> {
    const out: Array<Record<string, unknown>> = [];
    while (this.core.continues(this.opts.steps, out.length)) {
      const rec = await this.step();
      out.push(rec);
    }
    return out;
  }

  private drawPrompts(): number[] {
    const n = this.prompts.length;
    const order = this.dataRng.shuffle([...Array(n).keys()]);
    // fewer prompts than P: take them all, then top up with a second shuffle (repeats across groups)
    while (order.length < this.opts.promptsPerStep) order.push(...this.dataRng.shuffle([...Array(n).keys()]));
    return order.slice(0, this.opts.promptsPerStep);
  }

  /** Runs one GRPO step and returns (and logs) its record. */
  async step(): Promise<Record<string, unknown>> {
    const o = this.opts;
    const stepIndex = this.core.step;
    const t0 = Date.now();
    const picked = this.drawPrompts();
    const prompts = picked.map((i) => this.prompts[i]);
    const samplingLog: Record<string, number> = {};
    const groups = await this.sampler(prompts, o.groupSize, { seed: this.sampleRng.seed(), step: stepIndex, log: samplingLog });
    if (groups.length !== prompts.length || groups.some((g) => g.length !== o.groupSize)) {
      throw new T2sError("bad_sampler", `the sampler returned ${groups.map((g) => g.length).join("/")} rollouts for ${prompts.length} prompts x ${o.groupSize}`);
    }
    const t1 = Date.now();
    const rollouts = groups.flat();
    const grades = await Promise.all(rollouts.map((r, i) => this.grader(prompts[Math.floor(i / o.groupSize)], r)));
    const t2 = Date.now();
    const rewards = grades.map((g) => g.reward);
    const adv = groupAdvantages(rewards, o.groupSize, o.scale);
    const keep = rollouts.map((r) => (o.maskTruncated && r.truncated ? 0 : 1));
    const train = await this.optimise(rollouts, adv.advantages, keep);
    const t3 = Date.now();

    const completionLengths = rollouts.map((r) => r.rows.reduce((a, row) => a + row.mask.reduce((x, y) => x + y, 0), 0));
    const trainedTokens = rollouts.reduce((a, r) => a + r.rows.reduce((x, row) => x + row.ids.length, 0), 0) * o.mu;
    const rec: Record<string, unknown> = {
      step: stepIndex,
      prompts: prompts.length,
      samples: rollouts.length,
      reward_mean: adv.rewardMean,
      reward_std: adv.rewardStd,
      correct_rate: grades.filter((g) => g.correct).length / grades.length,
      frac_reward_zero_std: adv.fracZeroStd,
      ...train,
      completion_length_mean: mean(completionLengths),
      completion_length_min: Math.min(...completionLengths),
      completion_length_max: Math.max(...completionLengths),
      truncated_rate: rollouts.filter((r) => r.truncated).length / rollouts.length,
      tokens_per_s: trainedTokens / Math.max(1e-3, (t3 - t2) / 1000),
      sample_time_s: (t1 - t0) / 1000,
      ...samplingLog,
      grade_time_s: (t2 - t1) / 1000,
      train_time_s: (t3 - t2) / 1000,
    };
    if (adv.fracZeroStd > 0.5 && stepIndex < (o.zeroStdWarnSteps ?? 3)) {
      const msg = `step ${stepIndex}: ${(adv.fracZeroStd * 100).toFixed(0)}% of samples are in groups whose rewards are all equal (no learning signal); the band may be solved or hopeless for this model`;
      rec.warning = msg;
      this.core.warn(msg);
    }
    this.core.step += 1;
    if (o.onEval && o.evalEvery && (this.core.step % o.evalEvery === 0 || this.core.step >= o.steps)) {
      for (const [k, v] of Object.entries(await o.onEval(this.core.step))) rec[`eval_${k}`] = v;
    }
    rec.step_time_s = (Date.now() - t0) / 1000;
    this.core.log(rec);
    if (this.core.checkpointDue(o.steps)) await this.core.save({ data: this.dataRng.state(), sample: this.sampleRng.state() });
    return rec;
  }

  /** The mu optimisation passes over one generated batch; returns the training metrics. */
  private async optimise(rollouts: Rollout[], rolloutAdv: number[], rolloutKeep: number[]): Promise<Record<string, number>> {
    const o = this.opts;
    const mu = o.mu;
    const rowsAll: TokenRow[] = [];
    const advantages: number[] = [];
    const keep: number[] = [];
    rollouts.forEach((r, i) => {
      for (const row of r.rows) {
        rowsAll.push(row);
        advantages.push(rolloutAdv[i]);
        keep.push(rolloutKeep[i]);
      }
    });
    const plan = planMicroBatches(rowsAll, scoredWidth(this.lm), { maxElements: o.maxTensorElements, maxRows: o.maxMicroBatchRows });
    const batches = plan.map((rows) => {
      const t = batchTensors(rows.map((i) => rowsAll[i]), rows.map((i) => keep[i]));
      return { ...t, advantages: tf.tensor1d(rows.map((i) => advantages[i])) };
    });
    const temperature = o.temperature;
    const counts: StepCounts = {
      sequences: rowsAll.length,
      tokens: batches.reduce((a, b) => a + b.tokens, 0),
      microBatches: batches.length,
      maxCompletionLength: o.maxCompletionLength,
    };
    // reference and (for mu > 1) old log-probs are constants of this batch
    const refs = this.settings.beta > 0 ? batches.map((b) => tf.tidy(() => sequenceLogprobs(this.lm, b.ids, { temperature, reference: true, from: b.from }).logp)) : null;
    const olds = mu > 1 ? batches.map((b) => tf.tidy(() => sequenceLogprobs(this.lm, b.ids, { temperature, from: b.from }).logp)) : null;
    const metrics: Record<string, number> = {};
    const first: Record<string, number> = {};
    // how one micro-batch's sum joins the step's (LossSums: Max / Min keys by max / min)
    const combine = (k: string, a: number | undefined, v: number) => (a === undefined ? v : k.endsWith("Max") ? Math.max(a, v) : k.endsWith("Min") ? Math.min(a, v) : a + v);
    try {
      for (let pass = 0; pass < mu; pass++) {
        const held: Array<Record<string, tf.Tensor>> = [];
        const r = await this.core.optimizerStep(batches.length, (i) => {
          const b = batches[i];
          const lp = sequenceLogprobs(this.lm, b.ids, { temperature, entropy: pass === 0, from: b.from });
          const rollout = b.sampled ? { logp: b.sampled.logp, known: b.sampled.mask } : null;
          const res = policyLoss({ logp: lp.logp, oldLogp: olds ? olds[i] : null, refLogp: refs?.[i], advantages: b.advantages, mask: b.mask, rollout }, this.settings, counts);
          const h: Record<string, tf.Tensor> = { ...(res.sums as unknown as Record<string, tf.Tensor>) };
          if (pass === 0) {
            h.entropy = tf.keep(tf.sum(tf.mul(lp.entropy!, b.mask)));
            lp.entropy!.dispose();
          }
          held.push(h);
          return res.loss;
        });
        const got: Record<string, number> = {};
        for (const h of held) {
          // one read-back per micro-batch, not one per figure (each is a device round trip on a GPU)
          const keys = Object.keys(h);
          const packed = tf.stack(keys.map((k) => h[k]));
          const values = await packed.data();
          tf.dispose([packed, ...Object.values(h)]);
          keys.forEach((k, j) => (got[k] = combine(k, got[k], values[j])));
        }
        if (pass === 0) {
          Object.assign(first, got);
          metrics.loss = r.loss;
          metrics.grad_norm = r.gradNorm;
          metrics.lr = r.lr;
        } else if (pass === mu - 1) {
          // clip fractions of the last pass show how far the policy moved off the sampled one
          metrics.loss_last_pass = r.loss;
          metrics.clip_ratio_region_last_pass = got.tokens ? got.clipRegion / got.tokens : 0;
        }
      }
    } finally {
      for (const b of batches) tf.dispose([b.mask, b.advantages, ...(b.sampled ? [b.sampled.logp, b.sampled.mask] : [])]);
      if (refs) tf.dispose(refs);
      if (olds) tf.dispose(olds);
    }
    const n = Math.max(1, first.tokens ?? 0);
    const out: Record<string, number> = {
      ...metrics,
      kl: (first.kl ?? 0) / n,
      entropy: (first.entropy ?? 0) / n,
      clip_ratio_low: (first.clipLow ?? 0) / n,
      clip_ratio_high: (first.clipHigh ?? 0) / n,
      clip_ratio_region: (first.clipRegion ?? 0) / n,
      trained_tokens: first.tokens ?? 0,
      micro_batches: batches.length,
      // the rollout/learner mismatch, between the sampler's log-probs and the learner's before the update
      ...mismatchMetrics(first),
    };
    return out;
  }

  dispose(): void {
    this.core.dispose();
  }
}

function mean(xs: number[]): number {
  return xs.length ? xs.reduce((a, b) => a + b, 0) / xs.length : 0;
}
