/**
 * What the SFT and GRPO drivers share: the optimizer step over accumulated micro-batch gradients
 * (clip, schedule, AdamW), checkpoints with `resume`, and the per-step log (jsonl + callback).
 */
import { existsSync, mkdirSync } from "node:fs";
import { writeFileAtomic } from "../core/files.js";
import { join } from "node:path";
import { tf } from "../backend/tf.js";
import { appendJsonl, readJsonl, toJsonl } from "../core/jsonl.js";
import { T2sError } from "../core/errors.js";
import { trimGpuBufferPool } from "../backend/gpu-pool.js";
import { ensureGradients } from "../backend/gradients.js";
import { latestCheckpoint, loadCheckpoint, pruneCheckpoints, saveCheckpoint, type SaveOptions, type TrainerState } from "./checkpoint.js";
import type { NamedVariable, TrainableLM } from "./lm.js";
import { AdamW, clipFactor, globalGradNorm, GradAccumulator } from "./optimizer.js";
import { learningRate, type ScheduleKind } from "./schedule.js";
import { wasmHeapBytes } from "./memory-plan.js";

export interface OptimOptions {
  lr: number;
  schedule?: ScheduleKind;
  warmupSteps?: number;
  minLrRatio?: number;
  weightDecay?: number;
  beta1?: number;
  beta2?: number;
  adamEps?: number;
  /** Global gradient-norm limit (0 = no clipping). */
  maxGradNorm?: number;
}

export interface RunOptions {
  /** Where checkpoints and train_log.jsonl go (none: nothing is written). */
  outDir?: string;
  /** Save a checkpoint every N trainer steps (and always after the last); 0 = only at the end. */
  checkpointEvery?: number;
  /** Keep only the newest N checkpoints (older ones are deleted after each save); 0 = keep all. */
  keepCheckpoints?: number;
  /** Called with each step's log record (notebooks plot from here). */
  onStep?: (record: Record<string, unknown>) => void;
  /** Called with warnings (default: written to stderr). */
  onWarning?: (message: string) => void;
  /** How checkpoints name and describe the weights (PEFT adapter files for LoRA). */
  checkpointFiles?: () => SaveOptions;
  /** Wall-clock budget in seconds: the step running when it passes is finished and checkpointed, then training stops. */
  maxSeconds?: number;
  /** Bytes of freed buffers the WebGPU pool may keep between micro-batches and steps (default T2S_GPU_POOL_MB; the memory plan passes its room). */
  poolBudgetBytes?: number;
}

/**
 * Appends one record to a run's train_log.jsonl, whole or not at all: a write that fails midway cuts the
 * log back to what it held (appendJsonl) and throws T2sError("write_failed") naming the cause.
 */
export function appendTrainLog(path: string, record: Record<string, unknown>): void {
  try {
    appendJsonl(path, [record]);
  } catch (e) {
    const cause = `${(e as NodeJS.ErrnoException).code ?? "error"}: ${(e as Error).message}`;
    throw new T2sError("write_failed", `${path}: could not append a log record (${cause}); the log keeps its earlier records, and --resume continues from the last checkpoint once the cause is fixed`);
  }
}

export class TrainerCore {
  readonly params: NamedVariable[];
  readonly optimizer: AdamW;
  /** Completed trainer steps. */
  step = 0;
  private readonly started = Date.now();

  constructor(readonly lm: TrainableLM, private readonly optim: OptimOptions, private readonly totalOptimizerSteps: number, private readonly run: RunOptions) {
    ensureGradients();
    this.params = lm.trainableParams();
    if (this.params.length === 0) throw new T2sError("no_trainable", "the model has no trainable parameters (no adapter attached and full training off?)");
    this.optimizer = new AdamW(this.params, { beta1: optim.beta1, beta2: optim.beta2, eps: optim.adamEps, weightDecay: optim.weightDecay ?? 0 });
  }

  /** The learning rate of the next optimizer update. */
  currentLr(): number {
    return learningRate(this.optimizer.state().t, {
      lr: this.optim.lr,
      schedule: this.optim.schedule ?? "constant",
      warmupSteps: this.optim.warmupSteps ?? 0,
      totalSteps: this.totalOptimizerSteps,
      minLrRatio: this.optim.minLrRatio,
    });
  }

  /** Runs `lossOf(i)` for every micro-batch, sums the gradients, clips, and applies one AdamW update. */
  async optimizerStep(microBatches: number, lossOf: (i: number) => tf.Scalar): Promise<{ loss: number; gradNorm: number; lr: number }> {
    // one turn of the event loop per update: on wasm and cpu every op resolves at once, and Ctrl-C's handler would wait for the run's end
    await new Promise<void>((resolve) => setImmediate(resolve));
    const acc = new GradAccumulator();
    const vars = this.params.map((p) => p.variable);
    let loss = 0;
    try {
      for (let i = 0; i < microBatches; i++) {
        const { value, grads } = tf.variableGrads(() => lossOf(i), vars);
        loss += (await value.data())[0];
        value.dispose();
        acc.add(new Map(this.params.map((p) => [p.name, grads[p.variable.name] ?? tf.zerosLike(p.variable)])));
        // micro-batches of one step differ in shape too: a step of many long micro-batches (multi-turn GRPO
        // rows) would otherwise pool every one's activations at once and run the device out of memory
        if (i < microBatches - 1) trimGpuBufferPool(this.run.poolBudgetBytes);
      }
      const gradNorm = await globalGradNorm(acc.grads);
      if (!Number.isFinite(gradNorm)) throw new T2sError("non_finite", `gradient norm is ${gradNorm} at step ${this.step}; lower the learning rate or check the rewards`);
      const lr = this.currentLr();
      this.optimizer.step(acc.grads, lr, clipFactor(gradNorm, this.optim.maxGradNorm ?? 0));
      return { loss, gradNorm, lr };
    } finally {
      acc.dispose();
      // micro-batches change shape every step; WebGPU's pool would keep every freed size (see lib/backend/gpu-pool.ts)
      trimGpuBufferPool(this.run.poolBudgetBytes);
    }
  }

  private logPath(): string | null {
    return this.run.outDir ? join(this.run.outDir, "train_log.jsonl") : null;
  }

  /**
   * Appends a record to train_log.jsonl and hands it to the callback. After a failed append nothing more
   * is logged (write_failed), so the log never shows a later step after a missing one.
   */
  log(record: Record<string, unknown>): void {
    if (this.logFailure) throw this.logFailure;
    // on wasm the heap only grows: its size is the most the run has held, to set beside the memory plan
    const heap = wasmHeapBytes();
    if (heap !== null) record.wasm_heap_gb = Number((heap / 1e9).toFixed(3));
    const p = this.logPath();
    if (p) {
      mkdirSync(this.run.outDir!, { recursive: true });
      try {
        appendTrainLog(p, record);
      } catch (e) {
        this.logFailure = e as Error;
        throw e;
      }
    }
    this.run.onStep?.(record);
  }

  /** Why appending to train_log.jsonl failed; once set, log() refuses. */
  private logFailure: Error | null = null;

  warn(message: string): void {
    if (this.run.onWarning) this.run.onWarning(message);
    else process.stderr.write(`warning: ${message}\n`);
  }

  /** Whether the wall-clock budget (maxSeconds) is spent: the loop stops after the current step. */
  timeUp(): boolean {
    return this.run.maxSeconds !== undefined && (Date.now() - this.started) / 1000 >= this.run.maxSeconds;
  }

  /**
   * Whether a trainer's loop takes another step: steps remain and the budget is not spent; at least one
   * step per call (`doneThisCall` = 0), so a spent budget still makes progress.
   */
  continues(lastStep: number, doneThisCall: number): boolean {
    return this.step < lastStep && (doneThisCall === 0 || !this.timeUp());
  }

  /** Whether a checkpoint is due after the step just completed (`this.step` already counts it). */
  checkpointDue(lastStep: number): boolean {
    if (!this.run.outDir) return false;
    const every = this.run.checkpointEvery ?? 0;
    return this.step >= lastStep || (every > 0 && this.step % every === 0) || this.timeUp();
  }

  async save(rng: Record<string, number>, extra: Record<string, unknown> = {}): Promise<string | null> {
    if (!this.run.outDir) return null;
    const dir = await saveCheckpoint(this.run.outDir, this.params, this.optimizer, { step: this.step, rng, extra }, this.run.checkpointFiles?.() ?? {});
    // pruned only after the new checkpoint is complete, so a crash never leaves fewer than before
    pruneCheckpoints(this.run.outDir, this.run.keepCheckpoints ?? 0);
    return dir;
  }

  /**
   * Restores the newest checkpoint under the output folder (or `dir`); returns its state, or null when
   * there is none. Log records of steps after the checkpoint are dropped (they will be redone).
   */
  resume(dir?: string): TrainerState | null {
    const from = dir ?? (this.run.outDir ? latestCheckpoint(this.run.outDir) : null);
    const state = from ? loadCheckpoint(from, this.params, this.optimizer) : null;
    this.step = state?.step ?? 0;
    // with no checkpoint the run starts at step 0: records of a run killed before its first checkpoint go too
    this.trimLog(this.step);
    return state;
  }

  /** Drops step records of steps >= `step` from train_log.jsonl (they are redone); events stay when they happened before it. */
  private trimLog(step: number): void {
    const p = this.logPath();
    if (!p || !existsSync(p)) return;
    const { records: all, tornTail } = readJsonl<Record<string, unknown>>(p);
    const kept = all.filter((r) => (typeof r.event === "string" ? typeof r.at_step === "number" && r.at_step <= step : typeof r.step === "number" && r.step < step));
    // a torn last line (killed mid-append) is cut too, or the next record would be glued to it
    if (kept.length !== all.length || tornTail) writeFileAtomic(p, toJsonl(kept));
  }

  dispose(): void {
    this.optimizer.dispose();
  }
}
