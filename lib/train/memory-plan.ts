/**
 * The memory plan of a training run, printed when `t2s train` starts (and alone with `--plan`): what the
 * device will hold, line by line, and the peak against the device's memory. It is an estimate from the
 * model's shape and the run's settings, not a measurement; its constants count the tensors the decoder's
 * tape keeps per token (see `activationFloats`), and docs/training.md sets the estimate beside the peaks
 * measured on an H200. On wasm, whose tfjs ops keep far more, the update is counted by wasmUpdateBytes
 * and checked against the heap's 4 GiB. The plan also makes two choices: whether each layer is recomputed
 * in the backward (`gradient_checkpointing` auto) and whether the sampler's cache is freed before each update.
 */
import { T2sError } from "../core/errors.js";
import { tf } from "../backend/tf.js";
import type { ModelConfig } from "../model/config.js";
import { kvCacheBytesPerToken, type KvCacheDtype } from "../model/kv-cache-dtype.js";

export type CheckpointingSetting = "auto" | "on" | "off";

export interface PlanInput {
  config: ModelConfig;
  /** Bytes of the weights on the device, and whether the matrices are 16-bit packed. */
  weightBytes: number;
  packed: boolean;
  /** Trainable values (LoRA factors, or every weight) and whether every weight is trained. */
  trainable: number;
  fullWeights: boolean;
  /** Rows of one micro-batch, tokens of its longest row, and scored (completion) positions per row. */
  microBatchRows: number;
  rowTokens: number;
  scoredTokens: number;
  /** Tokens of the largest row group a micro-batch runs in one piece (activations stay under max_tensor_elements); absent: the whole micro-batch. */
  groupTokens?: number;
  /**
   * The sampler's cache (GRPO): sequences decoded together, tokens per sequence, its storage
   * (lib/model/kv-cache-dtype.ts; absent: fp32) and the prefix cache's extra slots (default 0).
   */
  sampler: { slots: number; maxLength: number; kvCacheDtype?: KvCacheDtype; cacheSlots?: number } | null;
  /** beta > 0: a reference forward per micro-batch (no tape). */
  reference: boolean;
  gradientCheckpointing: CheckpointingSetting;
  /** The tfjs backend the run trains on: "wasm" is planned by its own costs (wasmUpdateBytes); others as WebGPU. */
  backend?: string;
  /** Tokens at the start every row shares (the system prompt and schema): the trainer runs them once per micro-batch. */
  sharedPrefix?: number;
}

export interface PlanLine {
  what: string;
  bytes: number;
  note: string;
}

export interface MemoryPlan {
  lines: PlanLine[];
  /** Peak of the sampling phase and of the update phase, and the run's peak. */
  sampling: number;
  update: number;
  peak: number;
  limit: number | null;
  /** What the limit is, as the verdict names it ("on the device", "in the wasm heap"). */
  limitName: string;
  recompute: boolean;
  releaseSampler: boolean;
}

/**
 * The most the wasm backend's heap can hold: tfjs-backend-wasm keeps every tensor in one WebAssembly memory,
 * which grows up to 4 GiB less one 64 KiB page (its emscripten build's heap maximum) and never shrinks.
 */
export const WASM_HEAP_BYTES = 4294901760;

/**
 * Bytes of the wasm backend's heap now (its WebAssembly memory, which grows and never shrinks: the most
 * the run has held so far, rounded up by the heap's growth steps), or null when wasm is not the backend.
 */
export function wasmHeapBytes(): number | null {
  if (tf.getBackend() !== "wasm") return null;
  const heap = (tf.backend() as unknown as { wasm?: { HEAPU8?: Uint8Array } }).wasm?.HEAPU8;
  return heap ? heap.length : null;
}

/**
 * What an update costs on wasm, where every op runs as a tfjs op and the tape keeps its inputs, measured with
 * bench/wasm-memory.ts on the kit's model (4 layers, D 256) and the tiny test model (2 layers, D 64): over
 * 12 points (rows, prompt and reply lengths, layers kept or recomputed) the peak of tensor bytes of one
 * update was 0.94-1.05 of these terms (docs/training.md, "Memory on wasm"). `tokenFactor`: the tape's floats
 * per token and layer over activationFloats (RMS norms, rotary, LoRA sums and the backward's gradients of
 * each); `scoreFloats`: floats per attention score and layer (the scores before and after scaling and
 * masking, the softmax, and their gradients: the ops path holds [rows, heads, queries, keys]);
 * `logitFloats`: floats per scored logit (log-softmax pieces, probabilities, the gradient);
 * `recomputeFactor`: a recomputed layer's forward and backward over its share of the kept ones.
 */
const WASM_TAPE = { tokenFactor: 7, scoreFloats: 10, logitFloats: 7, recomputeFactor: 1.2 };

/**
 * The wasm heap over its tensors: fragmentation and XNNPACK's buffers measured 1-12% where the heap passed
 * 0.8 GB. A small heap shows more (it grows a fifth at a time), but a growth step never runs it out: it
 * stops at the cap.
 */
const WASM_SLACK = 0.15;

const F32 = 4;
/**
 * Freed buffers tfjs keeps for reuse, requests rounded up to size classes: the 7B GRPO step on an H200
 * peaked at 94 GB against 75.5 GB of tensors planned (docs/training.md), so a quarter is added.
 */
const SLACK = 0.25;

/** Values per token of a decoder layer's widest activation (the MLP's [tokens, intermediate] tensors, usually): what row groups are sized by. */
export function widestActivation(c: ModelConfig): number {
  return Math.max(c.intermediateSize, (c.numHeads + 2 * c.numKvHeads) * c.headDim, c.hiddenSize);
}

/** Values of one decoder layer's matrices. */
function layerMatrixValues(c: ModelConfig): number {
  const D = c.hiddenSize;
  return D * (c.numHeads + 2 * c.numKvHeads) * c.headDim + c.numHeads * c.headDim * D + 3 * D * c.intermediateSize;
}

/**
 * Floats per token one layer's tape keeps for the backward: the norms' inputs and outputs (4D), q, k, v
 * before and after rotary, the attention's output and row statistics, the o projection's input, and the
 * MLP's gate, up and SwiGLU output (3I).
 */
export function activationFloats(c: ModelConfig): number {
  const qkv = (c.numHeads + 2 * c.numKvHeads) * c.headDim;
  return 6 * c.hiddenSize + 2 * qkv + 2 * c.numHeads * c.headDim + 3 * c.intermediateSize;
}

/** The update's peak over the weights and optimizer state, with or without recomputed layers. */
function updateBytes(i: PlanInput, recompute: boolean): { lines: PlanLine[]; total: number } {
  const c = i.config;
  const tokens = i.microBatchRows * i.rowTokens;
  const perLayer = tokens * activationFloats(c) * F32;
  // a recomputed layer runs again for one row group at a time
  const groupTokens = Math.min(tokens, i.groupTokens ?? tokens);
  const perGroupLayer = groupTokens * activationFloats(c) * F32;
  const widened = i.packed ? layerMatrixValues(c) * F32 : 0;
  const lines: PlanLine[] = [];
  if (recompute) {
    lines.push({ what: "layer inputs kept", bytes: tokens * c.hiddenSize * F32 * c.numLayers, note: `${tokens} tokens x ${c.numLayers} layers` });
    lines.push({ what: "one layer recomputed", bytes: perGroupLayer + widened, note: `${groupTokens < tokens ? `${groupTokens} tokens' ` : ""}activations${i.packed ? " + its float32 weights" : ""}` });
  } else {
    lines.push({ what: "activations", bytes: perLayer * c.numLayers, note: `${tokens} tokens x ${c.numLayers} layers` });
    if (widened) lines.push({ what: "widened weights on the tape", bytes: widened * c.numLayers, note: "16-bit matrices widened per use, kept for the backward" });
  }
  lines.push({ what: "logits", bytes: i.microBatchRows * i.scoredTokens * c.vocabSize * F32 * 3, note: `${i.microBatchRows} rows x ${i.scoredTokens} scored x vocab ${c.vocabSize}, forward and backward` });
  if (i.reference) lines.push({ what: "reference forward", bytes: perGroupLayer + widened, note: "beta > 0, no tape" });
  return { lines, total: lines.reduce((s, l) => s + l.bytes, 0) };
}

/**
 * The update's peak on wasm: activations of every token the tape saw, the attention scores of the ops path
 * (quadratic in the row length), the logits, with WASM_TAPE's measured factors. A shared prefix runs once
 * per micro-batch: its tokens count once, and the rows' own tokens attend over the whole row.
 */
function wasmUpdateBytes(i: PlanInput, recompute: boolean): { lines: PlanLine[]; total: number } {
  const c = i.config;
  const T = i.rowTokens;
  const prefix = Math.min(i.sharedPrefix ?? 0, T - 1);
  const own = T - prefix;
  const tokens = i.microBatchRows * own + prefix;
  const scores = (i.microBatchRows * own * T + prefix * prefix) * c.numHeads;
  const perLayerTokens = tokens * activationFloats(c) * WASM_TAPE.tokenFactor * F32;
  const perLayerScores = scores * WASM_TAPE.scoreFloats * F32;
  const what = `${i.microBatchRows} rows x ${T} tokens${prefix ? ` (${prefix} shared, run once)` : ""}`;
  const lines: PlanLine[] = [];
  if (recompute) {
    lines.push({ what: "layer inputs kept", bytes: tokens * c.hiddenSize * F32 * c.numLayers, note: `${tokens} tokens x ${c.numLayers} layers` });
    lines.push({ what: "one layer recomputed", bytes: (perLayerTokens + perLayerScores) * WASM_TAPE.recomputeFactor, note: `${what}: its activations and attention scores (tfjs ops), forward and backward` });
  } else {
    lines.push({ what: "activations", bytes: perLayerTokens * c.numLayers, note: `${tokens} tokens x ${c.numLayers} layers, tfjs ops and their gradients` });
    lines.push({ what: "attention scores", bytes: perLayerScores * c.numLayers, note: `${what} x ${c.numHeads} heads x ${c.numLayers} layers: queries x keys, softmax and gradients` });
  }
  lines.push({ what: "logits", bytes: i.microBatchRows * i.scoredTokens * c.vocabSize * F32 * WASM_TAPE.logitFloats, note: `${i.microBatchRows} rows x ${i.scoredTokens} scored x vocab ${c.vocabSize}, log-softmax and gradient` });
  if (i.reference) lines.push({ what: "reference forward", bytes: (tokens * activationFloats(c) + scores) * F32, note: "beta > 0, no tape, one layer at a time" });
  return { lines, total: lines.reduce((s, l) => s + l.bytes, 0) };
}

/** The plan for `i` on a device of `limit` bytes (null: unknown); on wasm, `limit` is the heap's (WASM_HEAP_BYTES). */
export function planMemory(i: PlanInput, limit: number | null): MemoryPlan {
  const c = i.config;
  const wasm = i.backend === "wasm";
  const updateOf = wasm ? wasmUpdateBytes : updateBytes;
  const fixed: PlanLine[] = [{ what: "weights", bytes: i.weightBytes, note: i.packed ? "16-bit matrices, float32 norms" : "float32" }];
  // AdamW: a gradient and two moments per trainable value (full training's weights are counted above)
  fixed.push({ what: "gradients + AdamW moments", bytes: i.trainable * F32 * 3, note: `${i.trainable.toLocaleString("en-US")} trainable values` });
  const kvDtype = i.sampler?.kvCacheDtype ?? "fp32";
  const kv = i.sampler ? (i.sampler.slots + (i.sampler.cacheSlots ?? 0)) * i.sampler.maxLength * kvCacheBytesPerToken(c, kvDtype) : 0;
  const base = fixed.reduce((s, l) => s + l.bytes, 0);
  const sampling = base + kv;
  const kept = updateOf(i, false);
  const redone = updateOf(i, true);
  const slack = (b: number) => b * (1 + (wasm ? WASM_SLACK : SLACK));
  const fitsWith = (u: number, withKv: boolean) => limit === null || slack(base + u + (withKv ? kv : 0)) <= limit;
  // auto: recompute when kept activations do not fit, or when the tape would keep float32 copies of 16-bit
  // matrices worth more than the weights themselves (large models; a small model's copies cost nothing)
  const widenedOnTape = kept.lines.find((l) => l.what === "widened weights on the tape")?.bytes ?? 0;
  const recompute = i.gradientCheckpointing === "on" || (i.gradientCheckpointing === "auto" && (!fitsWith(kept.total, false) || widenedOnTape > Math.max(i.weightBytes, 2e9)));
  const upd = recompute ? redone : kept;
  // the sampler's cache is freed before the update when keeping it would not fit
  const releaseSampler = kv > 0 && !fitsWith(upd.total, true);
  const update = base + upd.total + (releaseSampler ? 0 : kv);
  const lines = [...fixed];
  if (kv) lines.push({ what: "sampler KV cache", bytes: kv, note: `${i.sampler!.slots} sequences x ${i.sampler!.maxLength} tokens, ${kvDtype}${i.sampler!.cacheSlots ? `, and ${i.sampler!.cacheSlots} prefix-cache slots` : ""}${releaseSampler ? "; freed before each update" : ""}` });
  lines.push(...upd.lines.map((l) => ({ ...l, what: `update: ${l.what}` })));
  const peak = slack(Math.max(sampling, update));
  lines.push({ what: "allocator slack", bytes: peak - Math.max(sampling, update), note: wasm ? `${WASM_SLACK * 100}% over the tensors alive (fragmentation, XNNPACK's buffers)` : `${SLACK * 100}% over the tensors alive` });
  return { lines, sampling, update, peak, limit, limitName: wasm ? "in the wasm heap" : "on the device", recompute, releaseSampler };
}

const gb = (b: number) => `${(b / 1e9).toFixed(2)} GB`;

/** The plan as text, one line per entry, then the peak against the device. */
export function formatPlan(p: MemoryPlan): string {
  const rows = p.lines.map((l) => `  ${l.what.padEnd(36)} ${gb(l.bytes).padStart(10)}  ${l.note}`);
  const verdict = p.limit === null ? "device memory unknown (set T2S_GPU_MEMORY_GB to check the plan)" : `of ${gb(p.limit)} ${p.limitName}${p.peak > p.limit ? ": does NOT fit" : ""}`;
  rows.push(`  ${"peak".padEnd(36)} ${gb(p.peak).padStart(10)}  ${verdict}; gradient checkpointing ${p.recompute ? "on" : "off"}`);
  return `memory plan:\n${rows.join("\n")}`;
}

/**
 * Throws T2sError("memory_plan") when the plan's peak is over the device's memory, naming the settings to
 * lower and how many rows per micro-batch would fit.
 */
export function assertPlanFits(p: MemoryPlan, i: PlanInput): void {
  if (p.limit === null || p.peak <= p.limit) return;
  let rows = i.microBatchRows;
  while (rows > 1 && planMemory({ ...i, microBatchRows: rows, gradientCheckpointing: p.recompute ? "on" : i.gradientCheckpointing }, p.limit).peak > p.limit) rows = Math.floor(rows / 2);
  const fitRows = planMemory({ ...i, microBatchRows: rows, gradientCheckpointing: p.recompute ? "on" : i.gradientCheckpointing }, p.limit).peak <= p.limit;
  const wasm = i.backend === "wasm";
  const hints = [
    fitRows && rows < i.microBatchRows ? `micro_batch_rows (now ${i.microBatchRows}; ${rows} fits)` : i.microBatchRows > 1 ? `micro_batch_rows (now ${i.microBatchRows})` : null,
    // on wasm the attention scores grow with the square of the row: shorter rows are the other lever
    wasm ? `the row length (now ${i.rowTokens} tokens: sampling.max_tokens, episode.max_context_tokens, shorter prompts)` : null,
    i.sampler ? `sampling.max_batch (now ${i.sampler.slots})` : null,
    !p.recompute ? "or set gradient_checkpointing on" : null,
    i.packed || wasm ? null : "or load the weights 16-bit (weights_dtype bf16)",
    i.sampler && (i.sampler.kvCacheDtype ?? "fp32") === "fp32" && (i.backend ?? "webgpu") === "webgpu" ? "or store the sampler's KV cache 16-bit (sampling.kv_cache_dtype fp16)" : null,
    wasm ? "or train on webgpu" : null,
  ].filter(Boolean);
  const has = wasm ? `the wasm heap holds at most ${gb(p.limit)}` : `the device has ${gb(p.limit)}`;
  throw new T2sError("memory_plan", `the run needs about ${gb(p.peak)} of ${wasm ? "wasm heap" : "device memory"} but ${has}; lower ${hints.join(", ")} (t2s train --plan prints the plan)`);
}

/**
 * What the WebGPU pool may keep of freed buffers between micro-batches and steps: `budget` (T2S_GPU_POOL_MB),
 * but no more than the room the plan leaves on the device (the pool's 24 GB default kept the sampler's
 * freed KV cache through a 7B update and took the peak from 77 to 88 GB).
 */
export function poolRoom(p: MemoryPlan, budget: number): number {
  return p.limit === null ? budget : Math.min(budget, Math.max(0, p.limit - p.peak));
}
