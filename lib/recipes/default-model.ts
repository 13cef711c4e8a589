/**
 * The recipe of the kit's own default model, every stage seeded: (1) a byte-level BPE tokenizer trained
 * on the train split and the system prompt, (2) a randomly initialised Qwen2 decoder, (3) full-weight SFT
 * with `t2s train sft` on the train split in the kit's single-turn prompt format, (4) export of a chosen
 * checkpoint as a Hugging Face folder (float16 weights) ready for `tfjs:` and `t2s serve`. With extra
 * train-only tasks, SFT reads `<work>/sft-tasks.jsonl` (train split + extras); the tokenizer never sees the extras.
 */
import { cpSync, existsSync, mkdirSync, readdirSync, writeFileSync } from "node:fs";
import { join, resolve } from "node:path";
import { schemaDdl } from "../db/schema.js";
import { notesFor } from "../db/notes.js";
import { sqlDuplicateKey } from "../tasks/dedup.js";
import { readTasks, writeTasks } from "../tasks/io.js";
import type { Task } from "../tasks/types.js";
import { readSafetensors, writeSafetensors, type StDtype } from "../model/safetensors.js";
import { readConfig as readTrainConfig } from "../train/config.js";
import { runTraining, type RunSummary } from "../train/run.js";
import { T2sError } from "../core/errors.js";
import { buildTokenizer, tokenizerCorpus } from "./tokenizer.js";
import { qwen2Config, writeInitialModel, type ModelShape } from "./init.js";

export interface SftSettings {
  steps: number;
  batch_size: number;
  lr: number;
  warmup_steps: number;
  min_lr_ratio: number;
  weight_decay: number;
  checkpoint_every: number;
  micro_batch_rows: number;
}

export interface RecipeOptions {
  /** Task file (train split used; holdout never read by any stage). */
  tasks: string;
  /** Working folder: init/ (tokenizer + random weights), sft.json, sft/ (checkpoints, train_log.jsonl). */
  work: string;
  shape: Omit<ModelShape, "vocabSize">;
  vocabSize: number;
  seed: number;
  sft: SftSettings;
  backend?: string;
  /**
   * Extra train-only tasks (e.g. from `t2s tasks augment`) that SFT reads after the train split of `tasks`;
   * never in the tokenizer corpus. Each must be split "train" and share no id or normalised gold SQL with a holdout task of `tasks`.
   */
  extraTasks?: string;
  /** Start SFT from this weights file (a model.safetensors of the same shape) instead of the random init. */
  initWeights?: string;
  /** Stop after the tokenizer and init stages (no training). */
  initOnly?: boolean;
  /** Stop training once this many optimizer steps are done (their checkpoint included); the schedule still spans sft.steps. */
  stopAt?: number;
  /** Stop training (with the checkpoints written so far) after this many seconds. */
  maxSeconds?: number;
  /** Continue the SFT run from its last checkpoint under `<work>/sft` (a run cut by --max-seconds or --stop-at). */
  resume?: boolean;
  onNote?: (message: string) => void;
  onStep?: (record: Record<string, unknown>) => void;
}

/** The default model's recipe settings (the numbers the model card documents). */
export function defaultRecipe(tasks: string, work: string): RecipeOptions {
  return {
    tasks, work, seed: 1, vocabSize: 4096,
    shape: { hiddenSize: 256, numLayers: 4, numHeads: 4, numKvHeads: 2, intermediateSize: 704, maxPositions: 2048 },
    sft: { steps: 600, batch_size: 32, lr: 2e-3, warmup_steps: 30, min_lr_ratio: 0.1, weight_decay: 0.1, checkpoint_every: 100, micro_batch_rows: 16 },
  };
}

/** Stages 1-2: writes tokenizer.json, tokenizer_config.json and random weights into `<work>/init`; returns that folder and the parameter count. */
export function initStage(o: RecipeOptions): { dir: string; parameters: number } {
  const tasks = readTasks(o.tasks);
  const first = tasks.find((t) => t.split === "train");
  if (!first) throw new T2sError("no_tasks", `${o.tasks} has no train-split tasks`);
  if (tasks.some((t) => t.db_path !== first.db_path)) throw new T2sError("bad_value", `${o.tasks}: the recipe trains on one database; tasks name several`);
  const dir = join(o.work, "init");
  const corpus = tokenizerCorpus(tasks, schemaDdl(first.db_path), notesFor(first));
  const bpe = buildTokenizer(dir, corpus, { vocabSize: o.vocabSize, maxTokenBytes: 32, countCap: 64, maxLength: o.shape.maxPositions });
  o.onNote?.(`tokenizer: ${bpe.vocab.size} tokens, ${bpe.merges.length} merges`);
  const parameters = writeInitialModel(dir, qwen2Config({ ...o.shape, vocabSize: bpe.vocab.size }), o.seed);
  if (o.initWeights) {
    if (!existsSync(o.initWeights)) throw new T2sError("missing_file", `${o.initWeights} does not exist`);
    cpSync(o.initWeights, join(dir, "model.safetensors"));
    o.onNote?.(`init: weights from ${o.initWeights}`);
  }
  o.onNote?.(`init: Qwen2 ${o.shape.hiddenSize}x${o.shape.numLayers}, ${parameters} parameters, seed ${o.seed}`);
  return { dir, parameters };
}

/** The file SFT reads its tasks from: `<work>/sft-tasks.jsonl` with extra tasks, else the task file itself. */
export function sftTasksPath(o: RecipeOptions): string {
  return o.extraTasks ? join(resolve(o.work), "sft-tasks.jsonl") : resolve(o.tasks);
}

/**
 * The train split of `tasksPath` followed by the extra tasks of `extraPath`, after checking each extra task
 * against the holdout of `tasksPath` (split, id and normalised gold query) and the train split (id), and that
 * all run on one database. Throws T2sError naming the first offending extra task.
 */
export function trainOnlyTasks(tasksPath: string, extraPath?: string): { train: Task[]; extra: Task[] } {
  const tasks = readTasks(tasksPath);
  const train = tasks.filter((t) => t.split === "train");
  if (!extraPath) return { train, extra: [] };
  if (!existsSync(extraPath)) throw new T2sError("missing_file", `--extra-tasks ${extraPath} does not exist`);
  const extra = readTasks(extraPath);
  const holdout = tasks.filter((t) => t.split === "holdout");
  const holdoutIds = new Set(holdout.map((t) => t.id));
  const holdoutSql = new Map(holdout.map((t) => [sqlDuplicateKey(t.gold_sql), t.id]));
  const trainIds = new Set(train.map((t) => t.id));
  const dbPath = train[0]?.db_path;
  for (const t of extra) {
    const where = `${extraPath}: task ${t.id}`;
    if (t.split !== "train") throw new T2sError("holdout_leak", `${where} has split "${t.split}"; extra tasks must all be train split`);
    if (holdoutIds.has(t.id)) throw new T2sError("holdout_leak", `${where} is a holdout task of ${tasksPath}; extra tasks must not contain holdout questions`);
    const sqlHit = holdoutSql.get(sqlDuplicateKey(t.gold_sql));
    if (sqlHit) throw new T2sError("holdout_leak", `${where} has the same gold SQL as holdout task ${sqlHit} of ${tasksPath}; extra tasks must not contain holdout gold queries`);
    if (trainIds.has(t.id)) throw new T2sError("bad_task", `${where} is already a train task of ${tasksPath}; drop it from the extra file`);
    if (t.db_path !== dbPath) throw new T2sError("bad_value", `${where} is over ${t.db_path}, the train tasks over ${dbPath}; the recipe trains on one database`);
  }
  return { train, extra };
}

/**
 * Checks the extra tasks against the holdout of `o.tasks` and writes `<work>/sft-tasks.jsonl` (train split of
 * `o.tasks`, then the extras); returns its path and the extra count. Throws T2sError naming the first offending extra task.
 */
export function writeSftTasks(o: RecipeOptions): { path: string; extra: number } {
  if (!o.extraTasks) throw new T2sError("bad_value", "writeSftTasks needs extraTasks");
  const { train, extra } = trainOnlyTasks(o.tasks, o.extraTasks);
  const path = sftTasksPath(o);
  mkdirSync(resolve(o.work), { recursive: true });
  writeTasks(path, [...train, ...extra]);
  o.onNote?.(`sft tasks: ${train.length} train + ${extra.length} extra in ${path}`);
  return { path, extra: extra.length };
}

/** Returns the SFT config object the recipe writes to `<work>/sft.json` (paths relative to it). */
export function sftConfig(o: RecipeOptions): Record<string, unknown> {
  return {
    model: "init", full_weights: true, tasks: sftTasksPath(o), split: "train",
    steps: o.sft.steps, batch_size: o.sft.batch_size, lr: o.sft.lr, schedule: "cosine", warmup_steps: o.sft.warmup_steps,
    min_lr_ratio: o.sft.min_lr_ratio, weight_decay: o.sft.weight_decay, max_grad_norm: 1, micro_batch_rows: o.sft.micro_batch_rows,
    checkpoint_every: o.sft.checkpoint_every, seed: o.seed, output_dir: "sft", episode: { style: "single" },
    ...(o.backend ? { backend: o.backend } : {}),
  };
}

class TimeUp extends Error {}

/** Stages 1-3: init, then SFT; returns the training summary (checkpoints under `<work>/sft/checkpoints`). */
export async function runRecipe(o: RecipeOptions): Promise<{ parameters: number; summary: RunSummary | null; stoppedEarly: boolean }> {
  mkdirSync(o.work, { recursive: true });
  // check the extras before spending time on the tokenizer
  if (o.extraTasks) writeSftTasks(o);
  const { parameters } = initStage(o);
  if (o.initOnly) return { parameters, summary: null, stoppedEarly: false };
  const file = join(o.work, "sft.json");
  writeFileSync(file, JSON.stringify(sftConfig(o), null, 2) + "\n");
  try {
    const summary = await runTraining(readTrainConfig(file, "sft"), {
      backend: o.backend, onNote: o.onNote, maxSeconds: o.maxSeconds, resume: o.resume,
      onStep: (r) => {
        o.onStep?.(r);
        // records count steps from 0, so record `stopAt` comes after the checkpoint of step `stopAt`
        if (o.stopAt !== undefined && Number(r.step) >= o.stopAt) throw new TimeUp(`stopped after step ${o.stopAt} (--stop-at)`);
      },
    });
    if (summary.stopped_early) o.onNote?.(`stopped after ${o.maxSeconds} s (--max-seconds), at step ${summary.resumed_from + summary.steps_done}`);
    return { parameters, summary, stoppedEarly: summary.stopped_early };
  } catch (e) {
    if (!(e instanceof TimeUp)) throw e;
    o.onNote?.(e.message);
    return { parameters, summary: null, stoppedEarly: true };
  }
}

/** Steps that have a checkpoint under `<work>/sft/checkpoints`, ascending. */
export function checkpointSteps(work: string): number[] {
  const root = join(work, "sft", "checkpoints");
  if (!existsSync(root)) return [];
  return readdirSync(root).map((n) => /^step-(\d+)$/.exec(n)).filter((m): m is RegExpExecArray => m !== null).map((m) => Number(m[1])).sort((a, b) => a - b);
}

/**
 * Stage 4: writes a model folder from the init folder's config/tokenizer and a weights file (a checkpoint's
 * model.safetensors), narrowed to `dtype` (default F16); returns the folder.
 */
export function exportModel(initDir: string, weightsFile: string, out: string, dtype: StDtype = "F16", metadata: Record<string, string> = {}): string {
  if (!existsSync(weightsFile)) throw new T2sError("missing_file", `${weightsFile} does not exist`);
  mkdirSync(out, { recursive: true });
  for (const f of ["config.json", "generation_config.json", "tokenizer.json", "tokenizer_config.json"]) cpSync(join(initDir, f), join(out, f));
  const tensors = new Map<string, { shape: number[]; data: Float32Array }>();
  for (const [name, t] of readSafetensors(weightsFile)) tensors.set(name, { shape: t.shape, data: t.data });
  writeSafetensors(join(out, "model.safetensors"), tensors, { dtype, metadata });
  return out;
}
