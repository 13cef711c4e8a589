/**
 * The trainer's view of a lib/model CausalLM: the trainable variables (the LoRA pairs of one adapter, or
 * every weight for full training) and causal logits with the adapter applied, or without it as the
 * reference policy. Checkpoints of an adapter are PEFT folders (adapter_model.safetensors +
 * adapter_config.json) that `t2s serve` and lib/model's attachAdapter load as they are.
 */
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { tf } from "../backend/tf.js";
import { T2sError } from "../core/errors.js";
import { MAX_TENSOR_ELEMENTS } from "../core/defaults.js";
import { configToJson } from "../model/config.js";
import { decoderStep, type KvCache, type LayerWeights, type Linear, type StepInput } from "../model/decoder.js";
import { matMulWeightT } from "../model/layout.js";
import { dense, isPacked, type WeightMatrix } from "../model/packed.js";
import { defaultOf } from "./settings.js";
import { commonPrefix } from "../model/prefix.js";
import type { CausalLM } from "../model/model.js";
import { adapterMetadata, adapterTensors, peftAdapterConfig } from "../model/lora.js";
import type { SaveOptions } from "./checkpoint.js";
import { widestActivation } from "./memory-plan.js";
import { ensureGradients } from "../backend/gradients.js";
import type { NamedVariable, TrainableLM } from "./lm.js";

const LINEARS: Array<[keyof LayerWeights, string]> = [
  ["q", "self_attn.q_proj"], ["k", "self_attn.k_proj"], ["v", "self_attn.v_proj"], ["o", "self_attn.o_proj"],
  ["gate", "mlp.gate_proj"], ["up", "mlp.up_proj"], ["down", "mlp.down_proj"],
];

/** Turns every weight of the model into a tf.Variable (in place) and returns them with their HF names. */
export function makeFullTrainable(model: CausalLM): NamedVariable[] {
  const out: NamedVariable[] = [];
  const w = model.weights;
  const seen = new Map<tf.Tensor, tf.Variable>();
  // a 16-bit weight becomes a float32 master copy: full training never updates packed storage
  const m = (w: WeightMatrix, name: string): tf.Tensor2D => {
    if (!isPacked(w)) return v(w, name);
    const wide = dense(w);
    w.dispose();
    return v(wide, name);
  };
  const v = <T extends tf.Tensor>(t: T, name: string): T => {
    let variable = seen.get(t);
    if (!variable) {
      variable = t instanceof tf.Variable ? t : tf.variable(t, true, `full/${model.name}/${name}`);
      if ((variable as tf.Tensor) !== t) t.dispose();
      seen.set(t, variable);
      out.push({ name, variable });
    }
    return variable as unknown as T;
  };
  w.embed = m(w.embed, "model.embed_tokens.weight");
  w.norm = v(w.norm, "model.norm.weight");
  if (w.lmHead) w.lmHead = m(w.lmHead, "lm_head.weight");
  w.layers.forEach((l, i) => {
    const p = `model.layers.${i}.`;
    l.inputNorm = v(l.inputNorm, `${p}input_layernorm.weight`);
    l.postNorm = v(l.postNorm, `${p}post_attention_layernorm.weight`);
    if (l.qNorm) l.qNorm = v(l.qNorm, `${p}self_attn.q_norm.weight`);
    if (l.kNorm) l.kNorm = v(l.kNorm, `${p}self_attn.k_norm.weight`);
    for (const [field, path] of LINEARS) {
      const lin = l[field] as Linear;
      lin.weight = m(lin.weight, `${p}${path}.weight`);
      if (lin.bias) lin.bias = v(lin.bias, `${p}${path}.bias`);
    }
  });
  return out;
}

/** A step input of whole rows starting at position `start`, every token real. */
function plainStep(rows: number[][], start: number): StepInput {
  return { ids: rows, positions: rows.map((r) => Array.from({ length: r.length }, (_, i) => start + i)), valid: rows.map((r) => new Array<boolean>(r.length).fill(true)) };
}

/**
 * Shortest common prefix worth running once per micro-batch: below it, the extra decoder call costs more
 * than the repeated prefix tokens it saves.
 */
export const MIN_SHARED_PREFIX = 16;

export class ModelTrainable implements TrainableLM {
  readonly vocabSize: number;
  readonly hiddenSize: number;
  readonly hasReference: boolean;
  private readonly params: NamedVariable[];

  /**
   * Each decoder layer's activations are recomputed in the backward instead of kept (gradient
   * checkpointing): the update holds one layer's activations at a time, for one more forward.
   */
  recompute: boolean;

  /**
   * The most values one activation of the decoder may hold (WebGPU binds at most 2 GiB): a micro-batch
   * whose [tokens, intermediate] MLP tensors would pass it runs its rows in groups that do not, under one
   * tape. The trainer sets it from max_tensor_elements.
   */
  maxActivationElements: number;

  /**
   * Positions whose vocabulary logits sequenceLogprobs computes at once (logit_chunk_tokens): the scored
   * hidden states are projected a chunk at a time under a gradient that recomputes each chunk, so no
   * [positions, vocab] tensor, logits or their gradient, exists whole. 0: all at once. The trainer sets it.
   */
  logitChunkTokens: number;

  /**
   * `adapter`: the name of a trainable adapter attached to the model (createAdapter, or attachAdapter with
   * trainable: true); null trains all weights (converted to variables here). `recompute` and
   * `maxActivationElements`, `logitChunkTokens`: see above.
   */
  constructor(readonly model: CausalLM, readonly adapter: string | null, opts: { recompute?: boolean; maxActivationElements?: number; logitChunkTokens?: number } = {}) {
    this.recompute = opts.recompute === true;
    this.maxActivationElements = opts.maxActivationElements ?? MAX_TENSOR_ELEMENTS;
    this.logitChunkTokens = opts.logitChunkTokens ?? (defaultOf("logit_chunk_tokens", "sft") as number);
    ensureGradients();
    this.vocabSize = model.config.vocabSize;
    this.hiddenSize = model.config.hiddenSize;
    this.hasReference = adapter !== null;
    if (adapter === null) this.params = makeFullTrainable(model);
    else {
      this.params = adapterTensors(model, adapter).map(({ key, tensor }) => {
        if (!(tensor instanceof tf.Variable)) throw new T2sError("not_trainable", `adapter ${adapter} was attached without trainable: true`);
        return { name: key, variable: tensor as tf.Variable };
      });
    }
  }

  trainableParams(): NamedVariable[] {
    return this.params;
  }

  logits(ids: number[][], opts: { reference?: boolean; from?: number } = {}): tf.Tensor3D {
    const m = this.model;
    const from = opts.from ?? 0;
    const c = m.config;
    if (from === 0 && this.sharedStart(ids, from) === 0 && ids.length <= this.groupRows(ids[0].length)) {
      const adapter = opts.reference ? null : this.adapter;
      return tf.tidy(() => decoderStep(c, m.weights, m.invFreq, plainStep(ids, 0), null, { adapter, recompute: this.recompute }).logits) as tf.Tensor3D;
    }
    return tf.tidy(() => {
      const { hidden, head } = this.hidden(ids, opts);
      const [B, S, D] = hidden.shape;
      return tf.reshape(matMulWeightT(tf.reshape(hidden, [B * S, D]) as tf.Tensor2D, dense(head)), [B, S, c.vocabSize]);
    }) as tf.Tensor3D;
  }

  /**
   * The final (normed) hidden states [B, T - from, D] of positions from.. and the matrix [V, D] that projects
   * them onto the vocabulary (the head, or the tied embeddings; 16-bit when the model stores it so).
   * sequenceLogprobs multiplies them `logitChunk()` positions at a time.
   */
  hidden(ids: number[][], opts: { reference?: boolean; from?: number } = {}): { hidden: tf.Tensor3D; head: WeightMatrix } {
    const T = ids[0].length;
    const B = ids.length;
    const from = opts.from ?? 0;
    const m = this.model;
    const c = m.config;
    const adapter = opts.reference ? null : this.adapter;
    const recompute = this.recompute;
    // the rows' common prompt prefix (system prompt + schema) is run once and its keys/values handed to the
    // rows as a batch-1 cache, broadcast inside each layer; only positions from `from` on are scored, so the
    // prefix may reach up to there
    const start = this.sharedStart(ids, from);
    const group = this.groupRows(T - start);
    const head = m.weights.lmHead ?? m.weights.embed;
    const hidden = tf.tidy(() => {
      const pre = start ? decoderStep(c, m.weights, m.invFreq, plainStep([ids[0].slice(0, start)], 0), null, { adapter, lastOnly: true, hiddenOnly: true, recompute, cacheOut: true }) : null;
      const parts: tf.Tensor[] = [];
      for (let r0 = 0; r0 < B; r0 += group) {
        const rows = ids.slice(r0, r0 + group);
        const cache: KvCache | null = pre ? { keys: pre.cache.keys, values: pre.cache.values, valid: rows.map(() => new Array<boolean>(start).fill(true)) } : null;
        parts.push(decoderStep(c, m.weights, m.invFreq, plainStep(rows.map((r) => r.slice(start)), start), cache, { adapter, hiddenOnly: true, recompute }).logits);
      }
      const all = parts.length === 1 ? parts[0] : tf.concat(parts, 0);
      return from === start ? all : tf.slice(all, [0, from - start, 0], [B, T - from, c.hiddenSize]);
    }) as tf.Tensor3D;
    return { hidden, head };
  }

  /** Positions sequenceLogprobs projects onto the vocabulary at once: logitChunkTokens, within maxActivationElements (0: all). */
  logitChunk(): number {
    if (this.logitChunkTokens <= 0) return 0;
    return Math.max(1, Math.min(this.logitChunkTokens, Math.floor(this.maxActivationElements / this.vocabSize)));
  }

  /** Tokens at the start of every row run once (0: none worth sharing), never past `from`. */
  private sharedStart(ids: number[][], from: number): number {
    const common = ids.length > 1 ? Math.min(commonPrefix(ids), from) : 0;
    return common >= MIN_SHARED_PREFIX ? common : 0;
  }

  /** Rows of `tokens` tokens each that one decoder call runs, its widest activation within maxActivationElements. */
  private groupRows(tokens: number): number {
    return Math.max(1, Math.floor(this.maxActivationElements / (tokens * widestActivation(this.model.config))));
  }

  /** Releases the trainer's own tensors (not the model's); it holds none now, the method stays for callers. */
  dispose(): void {}

  /** How checkpoints store the weights: a PEFT adapter folder, or model.safetensors + config for full training. */
  checkpointFiles(): SaveOptions {
    if (this.adapter === null) {
      // a full checkpoint is a model folder: the weights plus the base folder's config and tokenizer files
      const m = this.model;
      const extraFiles: Record<string, string | object> = {};
      if (m.dir) {
        for (const f of readdirSync(m.dir)) if (/\.(json|jinja|txt)$/.test(f) && f !== "model.safetensors.index.json") extraFiles[f] = readFileSync(join(m.dir, f), "utf8");
      } else extraFiles["config.json"] = configToJson(m.config);
      return { weightsFile: "model.safetensors", extraFiles };
    }
    return { weightsFile: "adapter_model.safetensors", extraFiles: { "adapter_config.json": peftAdapterConfig(this.model, this.adapter) }, metadata: adapterMetadata(this.model) };
  }
}
