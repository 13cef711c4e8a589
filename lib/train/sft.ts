/**
 * Supervised fine-tuning: next-token loss on completion tokens only (the mask leaves prompt tokens out),
 * averaged over all completion tokens of an optimizer step. Each epoch visits the examples in a seeded
 * order; a step's examples are bucketed by length into micro-batches under the tensor cap and their
 * gradients accumulated.
 */
import { tf } from "../backend/tf.js";
import { T2sError } from "../core/errors.js";
import { batchTensors, planMicroBatches, type TokenRow } from "./batching.js";
import { TrainerCore, type OptimOptions, type RunOptions } from "./core.js";
import { MAX_TENSOR_ELEMENTS } from "../core/defaults.js";
import type { TrainableLM } from "./lm.js";
import { scoredWidth, sequenceLogprobs } from "./logprobs.js";
import { SeededRandom } from "../core/random.js";

export interface SftOptions extends OptimOptions, RunOptions {
  /** Examples per optimizer step. */
  batchSize: number;
  /** Passes over the data (used when `steps` is not given). */
  epochs?: number;
  /** Optimizer steps to run (overrides epochs). */
  steps?: number;
  maxTensorElements?: number;
  maxMicroBatchRows?: number;
  seed: number;
}

export class SftTrainer {
  readonly core: TrainerCore;
  readonly totalSteps: number;
  private readonly stepsPerEpoch: number;

  constructor(readonly lm: TrainableLM, readonly examples: TokenRow[], readonly opts: SftOptions) {
    if (examples.length === 0) throw new T2sError("no_examples", "no SFT examples to train on");
    if (!(opts.batchSize >= 1)) throw new T2sError("bad_config", "batchSize must be at least 1");
    this.stepsPerEpoch = Math.ceil(examples.length / opts.batchSize);
    this.totalSteps = opts.steps ?? this.stepsPerEpoch * (opts.epochs ?? 1);
    this.core = new TrainerCore(lm, opts, this.totalSteps, opts);
  }

  /** The example indices of trainer step `step`: epoch order from a seed per epoch, so resume needs only the step. */
  batchOf(step: number): number[] {
    const epoch = Math.floor(step / this.stepsPerEpoch);
    const k = step % this.stepsPerEpoch;
    const order = new SeededRandom((this.opts.seed + Math.imul(epoch + 1, 0x9e3779b1)) >>> 0).shuffle([...this.examples.keys()]);
    return order.slice(k * this.opts.batchSize, (k + 1) * this.opts.batchSize);
  }

  /** Continues from the newest checkpoint in the output folder (or `dir`); returns the step it resumes at. */
  resume(dir?: string): number {
    return this.core.resume(dir)?.step ?? 0;
  }

  async train(): Promise<Array<Record<string, unknown>>> {
    const out: Array<Record<string, unknown>> = [];
    while (this.core.continues(this.totalSteps, out.length)) out.push(await this.step());
    return out;
  }

  /** Runs one optimizer step and returns (and logs) its record. */
  async step(): Promise<Record<string, unknown>> {
    const t0 = Date.now();
    const stepIndex = this.core.step;
    const rows = this.batchOf(stepIndex).map((i) => this.examples[i]);
    const plan = planMicroBatches(rows, scoredWidth(this.lm), { maxElements: this.opts.maxTensorElements ?? MAX_TENSOR_ELEMENTS, maxRows: this.opts.maxMicroBatchRows });
    const batches = plan.map((idx) => batchTensors(idx.map((i) => rows[i])));
    const tokens = batches.reduce((a, b) => a + b.tokens, 0);
    let r: { loss: number; gradNorm: number; lr: number };
    try {
      r = await this.core.optimizerStep(batches.length, (i) => {
        const b = batches[i];
        const logp = sequenceLogprobs(this.lm, b.ids, { from: b.from }).logp;
        return tf.div(tf.neg(tf.sum(tf.mul(logp, b.mask))), Math.max(1, tokens)) as tf.Scalar;
      });
    } finally {
      for (const b of batches) tf.dispose([b.mask, ...(b.sampled ? [b.sampled.logp, b.sampled.mask] : [])]);
    }
    const seconds = (Date.now() - t0) / 1000;
    const rec: Record<string, unknown> = {
      step: stepIndex,
      total_steps: this.totalSteps,
      epoch: Math.floor(stepIndex / this.stepsPerEpoch),
      examples: rows.length,
      loss: r.loss,
      grad_norm: r.gradNorm,
      lr: r.lr,
      trained_tokens: tokens,
      tokens: rows.reduce((a, x) => a + x.ids.length, 0),
      micro_batches: batches.length,
      tokens_per_s: rows.reduce((a, x) => a + x.ids.length, 0) / Math.max(1e-3, seconds),
      step_time_s: seconds,
    };
    this.core.step += 1;
    this.core.log(rec);
    if (this.core.checkpointDue(this.totalSteps)) await this.core.save({});
    return rec;
  }

  dispose(): void {
    this.core.dispose();
  }
}
