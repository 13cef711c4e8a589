/**
 * CausalLM: a loaded decoder (config, weights, tokenizer, attached LoRA adapters) with the entry points the
 * sampler, the server and the trainer use. Every call cleans up its intermediate tensors.
 */
import { tf } from "../backend/tf.js";
import { T2sError } from "../core/errors.js";
import type { ModelConfig } from "./config.js";
import { decoderStep, type DecoderWeights, type KvCache, type StepInput } from "./decoder.js";
import { storage } from "./packed.js";
import { releaseTransposed } from "./layout.js";
import { inverseFrequencies } from "./rope.js";
import type { ChatTokenizer } from "./tokenizer.js";
import { KV_CACHE_DTYPE_DEFAULT, type KvCacheDtypeName } from "./kv-cache-dtype.js";

/** An adapter attached to a model (its pairs live on the model's Linear layers under `name`). */
export interface AttachedAdapter {
  name: string;
  dir: string | null;
  r: number;
  alpha: number;
  scale: number;
  targetModules: string[];
  /** PEFT keys of the pairs, in a stable order. */
  keys: string[];
  /** The adapter_config.json it came with (or was created from). */
  config?: Record<string, unknown>;
}

/** What loading a checkpoint folder put on the device, and how long it took. */
export interface LoadInfo {
  seconds: number;
  weightBytes: number;
  packedBytes: number;
  files: number;
  checkpointDtype: string;
  /** fp32, 16-bit, or 16-bit matrices (norms and biases stay float32). */
  storage: string;
}

/** How the step runner runs a model's linear layers: null at the weights' precision (lib/model/quantization.ts). */
export type Quantization = "int8" | null;

export class CausalLM {
  readonly config: ModelConfig;
  readonly weights: DecoderWeights;
  readonly tokenizer: ChatTokenizer | null;
  /** The served name (the folder's base name unless given). */
  readonly name: string;
  readonly dir: string | null;
  /** The tfjs backend it runs on. */
  readonly backend: string;
  readonly invFreq: Float32Array;
  /** Unmerged adapters attached to this model, by name. */
  readonly adapters = new Map<string, AttachedAdapter>();
  /** Adapters folded into the weights (merged), in order. */
  readonly merged: string[] = [];
  private disposed = false;
  private readonly cleanups: (() => void)[] = [];
  /** When set, the only tensors this model owns (a merged copy shares the rest with its base). */
  private readonly owned: Set<tf.Tensor> | null;
  /** How a checkpoint load went (set by loadModel; absent for models built in memory). */
  loadInfo?: LoadInfo;
  /**
   * How the WebGPU step runner (sampling, serving) runs the base's linear layers: null at the weights'
   * own precision, "int8" quantized (lib/model/engine/int8-linears.ts). Training's own passes ignore it.
   */
  quantization: Quantization = null;
  /** How the WebGPU step runner stores the keys and values it samples with (lib/model/kv-cache-dtype.ts). */
  kvCacheDtype: KvCacheDtypeName = KV_CACHE_DTYPE_DEFAULT;

  constructor(config: ModelConfig, weights: DecoderWeights, tokenizer: ChatTokenizer | null, info: { name: string; dir: string | null; backend: string; owned?: Set<tf.Tensor> }) {
    this.owned = info.owned ?? null;
    this.config = config;
    this.weights = weights;
    this.tokenizer = tokenizer;
    this.name = info.name;
    this.dir = info.dir;
    this.backend = info.backend;
    this.invFreq = inverseFrequencies(config.headDim, config.ropeTheta, config.ropeScaling);
  }

  /** The tokenizer; throws T2sError("no_tokenizer") for models built without one (random models). */
  requireTokenizer(): ChatTokenizer {
    if (!this.tokenizer) throw new T2sError("no_tokenizer", `model ${this.name} has no tokenizer.json`);
    return this.tokenizer;
  }

  /**
   * Runs one step of new tokens after `cache`. Returns logits ([B, T, V], or [B, V] when lastOnly) and the
   * new cache; the caller disposes both (and the old cache, which is left untouched).
   */
  step(input: StepInput, cache: KvCache | null, opts: { lastOnly?: boolean; adapter?: string | null; chunkScores?: number } = {}): { logits: tf.Tensor; cache: KvCache } {
    this.checkIds(input.ids);
    let valid: boolean[][] = [];
    let shared: KvCache["shared"];
    const out = tf.tidy(() => {
      const r = decoderStep(this.config, this.weights, this.invFreq, input, cache, opts);
      valid = r.cache.valid;
      shared = r.cache.shared;
      return { logits: r.logits, keys: r.cache.keys, values: r.cache.values };
    });
    const next: KvCache = { keys: out.keys, values: out.values, valid };
    if (shared) next.shared = shared;
    return { logits: out.logits, cache: next };
  }

  /**
   * Causal logits [B, T, V] for ids [B, T] (int32 tensor or plain rows) starting at position 0 (rows
   * right-padded need no mask).
   * Differentiable with respect to weights and LoRA pairs that are tf.Variables; `adapter` picks the
   * unmerged adapter to apply (none by default).
   */
  logits(ids: tf.Tensor2D | number[][], opts: { adapter?: string | null } = {}): tf.Tensor3D {
    // plain arrays avoid a synchronous read-back, which GPU backends cannot do in Node
    const rows = Array.isArray(ids) ? ids : (ids.arraySync() as number[][]);
    const T = rows[0]?.length ?? 0;
    if (T === 0 || rows.some((r) => r.length !== T)) throw new RangeError("logits() needs a non-empty rectangular batch of ids");
    this.checkIds(rows);
    const input: StepInput = { ids: rows, positions: rows.map(() => Array.from({ length: T }, (_, i) => i)), valid: rows.map(() => new Array<boolean>(T).fill(true)) };
    return tf.tidy(() => decoderStep(this.config, this.weights, this.invFreq, input, null, { adapter: opts.adapter }).logits) as tf.Tensor3D;
  }

  /** Returns the logits of every position of one id sequence as plain arrays (for tests and the CLI). */
  async logitsOf(ids: number[], opts: { adapter?: string | null } = {}): Promise<Float32Array[]> {
    if (ids.length === 0) throw new Error("logitsOf needs at least one id");
    const { logits, cache } = this.step({ ids: [ids], positions: [ids.map((_, i) => i)], valid: [ids.map(() => true)] }, null, { adapter: opts.adapter });
    for (const t of [...cache.keys, ...cache.values]) t.dispose();
    const data = (await logits.data()) as Float32Array;
    logits.dispose();
    const V = this.config.vocabSize;
    return ids.map((_, i) => data.slice(i * V, (i + 1) * V));
  }

  private checkIds(ids: number[][]): void {
    const V = this.config.vocabSize;
    for (const row of ids) for (const id of row) if (!Number.isInteger(id) || id < 0 || id >= V) throw new RangeError(`token id ${id} is outside the vocabulary [0, ${V})`);
  }

  /** Every tensor the model owns (weights and adapter pairs), for disposal and counting. */
  tensors(): tf.Tensor[] {
    const w = this.weights;
    const out: tf.Tensor[] = [storage(w.embed), w.norm];
    if (w.lmHead) out.push(storage(w.lmHead));
    for (const l of w.layers) {
      out.push(l.inputNorm, l.postNorm);
      if (l.qNorm) out.push(l.qNorm);
      if (l.kNorm) out.push(l.kNorm);
      for (const lin of [l.q, l.k, l.v, l.o, l.gate, l.up, l.down]) {
        out.push(storage(lin.weight));
        if (lin.bias) out.push(lin.bias);
        for (const p of lin.lora?.values() ?? []) out.push(p.a, p.b);
      }
    }
    return out;
  }

  /** Runs `fn` when the model is disposed (resources built for it, e.g. a device runner). */
  onDispose(fn: () => void): void {
    this.cleanups.push(fn);
  }

  /** Releases the model's tensors (shared ones once). */
  dispose(): void {
    if (this.disposed) return;
    this.disposed = true;
    for (const fn of this.cleanups.splice(0)) fn();
    const mine = this.owned ?? new Set(this.tensors());
    releaseTransposed(mine);
    for (const t of mine) if (!t.isDisposed) t.dispose();
  }
}
