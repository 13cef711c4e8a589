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
import { MAX_TENSOR_ELEMENTS } from "../core/defaults.js";
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
  /** Scored positions projected onto the vocabulary at once (logit_chunk_tokens); absent or 0: all at once. */
  logitChunkTokens?: number;
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
 * Freed buffers tfjs keeps for reuse within a micro-batch, and requests rounded up to size classes (at most
 * 19% more bytes, about 9% on average). The GRPO steps measured on an H200 (docs/training.md, 1.5B, 3B and
 * 7B) peaked at 0.97-1.18x the tensors that code kept when every gradient of the tape was counted (the
 * plan before counted neither the gradients nor the prompt prefix's keys broadcast to every row, and
 * added a quarter).
 */
const SLACK = 0.15;

/**
 * Buffers of an update that keeps every layer's activations, over the activations, their gradients and the
 * summed gradients' addends: `npm run bench:update-memory -- --keep` on WebGPU (a software adapter, 4 layers
 * of D 256) measured 1.25-1.28x the plan without it, where the recomputed update measured 0.87-1.01x.
 */
const KEPT_TAPE_FACTOR = 1.3;

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

/**
 * Tokens the decoder runs for one micro-batch: a shared prefix once (batch 1), then each row's own tokens
 * (ModelTrainable.hidden); and the prefix's length (0 when rows share none worth running once).
 */
function decoderTokens(i: PlanInput): { tokens: number; own: number; prefix: number } {
  const prefix = i.microBatchRows > 1 ? Math.min(i.sharedPrefix ?? 0, i.rowTokens - 1) : 0;
  const own = i.rowTokens - prefix;
  return { tokens: i.microBatchRows * own + prefix, own, prefix };
}

/**
 * The vocabulary projection of one micro-batch: whole logits [rows x scored, V] (forward, the log-prob's
 * gradient and the softmax its backward reads), or with logit chunks one chunk's logits and gradient at a
 * time; and a 16-bit head's float32 copy, made for each product.
 */
function logitsLine(i: PlanInput, floatsPerLogit: number): PlanLine {
  const c = i.config;
  const scored = i.microBatchRows * i.scoredTokens;
  const chunk = i.logitChunkTokens ? Math.min(i.logitChunkTokens, scored) : scored;
  // chunks widen a large 16-bit head a block of vocabulary rows at a time (chunked-logprobs.ts)
  const head = i.packed ? Math.min(c.vocabSize * c.hiddenSize, i.logitChunkTokens ? MAX_TENSOR_ELEMENTS : Infinity) * F32 : 0;
  const what = chunk < scored ? `${chunk} of ${scored} scored positions at a time` : `${i.microBatchRows} rows x ${i.scoredTokens} scored`;
  return { what: "logits", bytes: chunk * c.vocabSize * F32 * floatsPerLogit + head, note: `${what} x vocab ${c.vocabSize}, forward and backward${head ? " + the head's float32 copy" : ""}` };
}

/** The update's peak over the weights and optimizer state, with or without recomputed layers. */
function updateBytes(i: PlanInput, recompute: boolean): { lines: PlanLine[]; total: number } {
  const c = i.config;
  const D = c.hiddenSize;
  const { tokens, own, prefix } = decoderTokens(i);
  const kvPerToken = 2 * c.numKvHeads * c.headDim;
  // tfjs keeps every gradient of a tape until its backward ends: a layer's activations, as many again, and
  // a gradient per consumer of the inputs several read (below); with every layer on one tape, measured
  // buffers were KEPT_TAPE_FACTOR times that
  const perLayer = tokens * (2 * activationFloats(c) + 6 * D) * F32 * KEPT_TAPE_FACTOR;
  // a recomputed layer runs again for one row group at a time, attending over the prefix's keys and values
  const groupRows = Math.max(1, Math.min(i.microBatchRows, Math.floor((i.groupTokens ?? tokens) / own)));
  const groupTokens = groupRows * own;
  // its backward holds the activations, the gradient of each, a gradient per consumer of the inputs several
  // read (tfjs keeps each addend of a summed gradient: the normed inputs of q/k/v and gate/up, the residual
  // stream; about 6 hidden-sized), and the attention's key and value gradients per query head before they
  // are summed per kv head
  const attendedKeys = groupRows * (prefix + own);
  const perGroupLayer = (groupTokens * (2 * activationFloats(c) + 6 * D) + groupRows * prefix * kvPerToken * 2 + attendedKeys * 2 * c.numHeads * c.headDim) * F32;
  const widened = i.packed ? layerMatrixValues(c) * F32 : 0;
  const shared = prefix ? ` (${prefix} shared, run once)` : "";
  const lines: PlanLine[] = [];
  if (recompute) {
    // the layers' inputs, and the prefix's keys and values every layer attends to (kept once, broadcast
    // inside each layer); a layer's output gradient is freed once its backward ran (recompute.ts)
    lines.push({ what: "layer inputs kept", bytes: (tokens * D + prefix * kvPerToken) * F32 * c.numLayers, note: `${i.microBatchRows} rows: ${tokens} tokens${shared} x ${c.numLayers} layers` });
    lines.push({ what: "one layer recomputed", bytes: perGroupLayer + 2 * groupTokens * D * F32 + widened, note: `${groupTokens < tokens ? `${groupTokens} tokens' ` : ""}activations and their gradients${i.packed ? " + its float32 weights" : ""}` });
  } else {
    lines.push({ what: "activations", bytes: perLayer * c.numLayers, note: `${i.microBatchRows} rows: ${tokens} tokens${shared} x ${c.numLayers} layers, and their gradients` });
    if (widened) lines.push({ what: "widened weights on the tape", bytes: widened * c.numLayers, note: "16-bit matrices widened per use, kept for the backward" });
  }
  // the decoder's last hidden states before and after the final norm, the scored positions (and their
  // copy split into logit chunks), each with its gradient
  lines.push({ what: "hidden states", bytes: i.microBatchRows * (own + i.scoredTokens) * 2 * D * F32 * 2, note: `${i.microBatchRows} rows x (${own} run + ${i.scoredTokens} scored) x ${D}, twice each, and gradients` });
  // in chunks: a chunk's logits and their gradient (the forward's are freed with the chunk); whole (or all in
  // one chunk): the tape keeps the logits for the backward beside the softmax and the gradient
  const chunked = !!i.logitChunkTokens && i.microBatchRows * i.scoredTokens > i.logitChunkTokens;
  const logits = logitsLine(i, chunked ? 2 : 3);
  lines.push(logits);
  if (i.reference) lines.push({ what: "reference forward", bytes: (groupTokens * activationFloats(c) + groupRows * prefix * kvPerToken) * F32 + widened, note: "beta > 0, no tape" });
  const sum = lines.reduce((s, l) => s + l.bytes, 0);
  // with recomputed layers and chunked logits, the chunks' backward is done before any layer is recomputed:
  // the two never hold memory at once, and the larger counts
  if (!recompute || !chunked) return { lines, total: sum };
  const layer = lines.find((l) => l.what === "one layer recomputed")!;
  logits.note += "; not beside a recomputed layer";
  return { lines, total: sum - Math.min(layer.bytes, logits.bytes) };
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
  lines.push(logitsLine(i, WASM_TAPE.logitFloats));
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

/**
 * The rows per micro-batch `i` may take on a device of `limit` bytes: its rows halved until the plan fits
 * (one row at least; a single row shares no prefix). Returns the fields of `i` to change.
 */
export function rowsThatFit(i: PlanInput, limit: number): Pick<PlanInput, "microBatchRows" | "sharedPrefix"> {
  let rows = i.microBatchRows;
  let sharedPrefix = i.sharedPrefix;
  while (rows > 1 && planMemory({ ...i, microBatchRows: rows, sharedPrefix }, limit).peak > limit) {
    rows = Math.ceil(rows / 2);
    if (rows === 1) sharedPrefix = 0;
  }
  return { microBatchRows: rows, sharedPrefix };
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
