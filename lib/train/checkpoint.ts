/**
 * Training checkpoints: the trainable weights (safetensors, named as the model names them: PEFT keys for
 * LoRA), the optimizer moments, the RNG states and the step, in checkpoints/step-NNNNNN/ under the run's
 * output folder. A checkpoint is written to a temporary folder and renamed into place, so a crash leaves
 * either the whole checkpoint or none.
 */
import { existsSync, mkdirSync, readdirSync, readFileSync, renameSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { tf } from "../backend/tf.js";
import { T2sError } from "../core/errors.js";
import { readSafetensors, writeSafetensors } from "../model/safetensors.js";
import type { NamedVariable } from "./lm.js";
import type { AdamW } from "./optimizer.js";

export const WEIGHTS_FILE = "trainable.safetensors";
const OPT_FILE = "optimizer.safetensors";
const STATE_FILE = "trainer_state.json";

export interface TrainerState {
  /** Completed trainer steps (the next step to run has this index). */
  step: number;
  /** Updates the optimizer has applied. */
  optimizerT: number;
  /** Named RNG states (SeededRandom.state()). */
  rng: Record<string, number>;
  /** Anything else the driver needs to continue exactly (data cursor, config digest, ...). */
  extra: Record<string, unknown>;
}

export interface SaveOptions {
  /** Name of the weights file (e.g. adapter_model.safetensors for a PEFT adapter). */
  weightsFile?: string;
  /** More files to write next to the weights (e.g. adapter_config.json), JSON-encoded when not strings. */
  extraFiles?: Record<string, string | object>;
  /** `__metadata__` strings of the weights file (e.g. the base record of an adapter, lib/model/base-record.ts). */
  metadata?: Record<string, string>;
}

/** The folder name of a step's checkpoint. */
export function checkpointName(step: number): string {
  return `step-${String(step).padStart(6, "0")}`;
}

async function toHost(named: Array<[string, tf.Tensor]>): Promise<Map<string, { shape: number[]; data: Float32Array }>> {
  const out = new Map<string, { shape: number[]; data: Float32Array }>();
  for (const [name, t] of named) out.set(name, { shape: t.shape.slice(), data: Float32Array.from(await t.data()) });
  return out;
}

/** Throws T2sError("non_finite") naming the first tensor holding a NaN or an infinity. */
function assertFinite(step: number, tensors: Map<string, { data: Float32Array }>): void {
  for (const [name, t] of tensors) {
    if (!t.data.every(Number.isFinite)) {
      throw new T2sError("non_finite", `${name} holds NaN or infinite values after step ${step}: training diverged, so no checkpoint was written; lower the learning rate and resume from the last checkpoint`);
    }
  }
}

/**
 * Writes a checkpoint for `state.step` under `outDir/checkpoints/`; returns its folder. Refuses weights or
 * optimizer moments that hold NaN or infinities (a diverged run), so a resume never starts from them.
 */
export async function saveCheckpoint(outDir: string, params: NamedVariable[], optimizer: AdamW, state: Omit<TrainerState, "optimizerT">, opts: SaveOptions = {}): Promise<string> {
  const weights = await toHost(params.map((p) => [p.name, p.variable]));
  const os = optimizer.state();
  const moments: Array<[string, tf.Tensor]> = [];
  for (const p of params) moments.push([`m.${p.name}`, os.m.get(p.name)!], [`v.${p.name}`, os.v.get(p.name)!]);
  const hostMoments = await toHost(moments);
  assertFinite(state.step, weights);
  assertFinite(state.step, hostMoments);
  const root = join(outDir, "checkpoints");
  mkdirSync(root, { recursive: true });
  const final = join(root, checkpointName(state.step));
  const tmp = `${final}.tmp-${process.pid}`;
  rmSync(tmp, { recursive: true, force: true });
  mkdirSync(tmp);
  const weightsFile = opts.weightsFile ?? WEIGHTS_FILE;
  writeSafetensors(join(tmp, weightsFile), weights, { metadata: opts.metadata });
  writeSafetensors(join(tmp, OPT_FILE), hostMoments);
  for (const [name, content] of Object.entries(opts.extraFiles ?? {})) {
    writeFileSync(join(tmp, name), typeof content === "string" ? content : JSON.stringify(content, null, 2) + "\n");
  }
  const full: TrainerState & { weights_file: string } = { ...state, optimizerT: os.t, weights_file: weightsFile };
  writeFileSync(join(tmp, STATE_FILE), JSON.stringify(full, null, 2) + "\n");
  rmSync(final, { recursive: true, force: true });
  renameSync(tmp, final);
  return final;
}

/** The newest complete checkpoint folder under `outDir/checkpoints`, or null when there is none. */
export function latestCheckpoint(outDir: string): string | null {
  const steps = completeCheckpoints(outDir);
  return steps.length ? steps[steps.length - 1] : null;
}

/** The step a complete checkpoint folder was written after (its trainer state's `step`). */
export function checkpointStep(dir: string): number {
  const statePath = join(dir, STATE_FILE);
  try {
    const step = (JSON.parse(readFileSync(statePath, "utf8")) as { step?: unknown }).step;
    if (typeof step === "number" && Number.isInteger(step) && step >= 0) return step;
  } catch {
    // reported below
  }
  throw new T2sError("bad_checkpoint", `${statePath} holds no step; it is not a complete checkpoint`);
}

/** The complete checkpoint folders under `outDir/checkpoints`, oldest first (a folder without a state file is a crash mid-write). */
function completeCheckpoints(outDir: string): string[] {
  const root = join(outDir, "checkpoints");
  if (!existsSync(root)) return [];
  return readdirSync(root)
    .filter((n) => /^step-\d+$/.test(n) && existsSync(join(root, n, STATE_FILE)))
    .sort()
    .map((n) => join(root, n));
}

/**
 * Deletes all but the newest `keep` complete checkpoints under `outDir/checkpoints` (keep <= 0: none are
 * deleted); returns the folders removed. Incomplete folders (a crash mid-write) are left for inspection.
 */
export function pruneCheckpoints(outDir: string, keep: number): string[] {
  if (keep <= 0) return [];
  const complete = completeCheckpoints(outDir);
  const removed = complete.slice(0, Math.max(0, complete.length - keep));
  for (const dir of removed) rmSync(dir, { recursive: true, force: true });
  return removed;
}

/**
 * Removes what killed runs left in a run folder: temporary checkpoint folders (`step-N.tmp-PID`) and temp
 * files (`*.tmp`, `*.tmp-PID`) of atomic writes. Only called by the holder of the folder's lock, so
 * nothing removed can belong to a write in progress. Returns the paths removed.
 */
export function removeTempCheckpoints(outDir: string): string[] {
  const removed: string[] = [];
  const isTemp = (n: string) => /\.tmp(-\d+)?$/.test(n);
  for (const dir of [outDir, join(outDir, "checkpoints")]) {
    if (!existsSync(dir)) continue;
    for (const n of readdirSync(dir).filter(isTemp)) {
      rmSync(join(dir, n), { recursive: true, force: true });
      removed.push(join(dir, n));
    }
  }
  return removed;
}

/** Restores weights and optimizer state from a checkpoint folder; returns the trainer state to continue from. */
export function loadCheckpoint(dir: string, params: NamedVariable[], optimizer: AdamW): TrainerState {
  const statePath = join(dir, STATE_FILE);
  if (!existsSync(statePath)) throw new T2sError("bad_checkpoint", `${dir} has no ${STATE_FILE}; it is not a complete checkpoint`);
  let state: TrainerState & { weights_file?: string };
  try {
    state = JSON.parse(readFileSync(statePath, "utf8"));
  } catch (e) {
    throw new T2sError("bad_checkpoint", `${statePath}: not valid JSON (${(e as Error).message})`);
  }
  const weights = readSafetensors(join(dir, state.weights_file ?? WEIGHTS_FILE));
  for (const p of params) {
    const w = weights.get(p.name);
    if (!w) throw new T2sError("bad_checkpoint", `${dir}: no weights for ${p.name}; was it written by a run with other adapter settings?`);
    if (w.shape.join(",") !== p.variable.shape.join(",")) throw new T2sError("bad_checkpoint", `${dir}: ${p.name} has shape [${w.shape}], the model wants [${p.variable.shape}]`);
    p.variable.assign(tf.tensor(w.data, p.variable.shape, "float32"));
  }
  const moments = readSafetensors(join(dir, OPT_FILE));
  const m = new Map<string, Float32Array>();
  const v = new Map<string, Float32Array>();
  for (const p of params) {
    const mm = moments.get(`m.${p.name}`);
    const vv = moments.get(`v.${p.name}`);
    if (!mm || !vv) throw new T2sError("bad_checkpoint", `${dir}: optimizer state lacks ${p.name}`);
    m.set(p.name, mm.data);
    v.set(p.name, vv.data);
  }
  optimizer.loadState({ t: state.optimizerT, m, v });
  return { step: state.step, optimizerT: state.optimizerT, rng: state.rng ?? {}, extra: state.extra ?? {} };
}
