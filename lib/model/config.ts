/**
 * config.json -> the decoder's shape. Reads both the older layout (`rope_theta` and `rope_scaling` at the
 * top level) and the newer one (`rope_parameters`), and names the architectures it knows.
 */
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { T2sError } from "../core/errors.js";

export type Architecture = "LlamaForCausalLM" | "Qwen2ForCausalLM" | "Qwen3ForCausalLM";
export const ARCHITECTURES: Architecture[] = ["LlamaForCausalLM", "Qwen2ForCausalLM", "Qwen3ForCausalLM"];

export interface RopeScaling {
  type: "default" | "llama3" | "linear";
  factor?: number;
  lowFreqFactor?: number;
  highFreqFactor?: number;
  originalMaxPositions?: number;
}

export interface ModelConfig {
  architecture: Architecture;
  vocabSize: number;
  hiddenSize: number;
  intermediateSize: number;
  numLayers: number;
  numHeads: number;
  numKvHeads: number;
  headDim: number;
  rmsNormEps: number;
  ropeTheta: number;
  ropeScaling: RopeScaling;
  tieWordEmbeddings: boolean;
  /** q/k/v projections carry a bias (Qwen2, or Llama with attention_bias). */
  attentionBias: boolean;
  /** Per-head RMSNorm on q and k before rotary (Qwen3). */
  qkNorm: boolean;
  mlpBias: boolean;
  maxPositions: number;
  eosTokenIds: number[];
  bosTokenId: number | null;
  padTokenId: number | null;
}

function num(raw: Record<string, unknown>, key: string, file: string, fallback?: number): number {
  const v = raw[key];
  if (v === undefined || v === null) {
    if (fallback !== undefined) return fallback;
    throw new T2sError("bad_config", `${file}: missing "${key}"`);
  }
  if (typeof v !== "number" || !Number.isFinite(v)) throw new T2sError("bad_config", `${file}: "${key}" must be a number, got ${JSON.stringify(v)}`);
  return v;
}

function ids(v: unknown): number[] {
  if (typeof v === "number") return [v];
  if (Array.isArray(v)) return v.filter((x): x is number => typeof x === "number");
  return [];
}

/** Returns the decoder shape described by a parsed config.json (`file` only names it in errors). */
export function parseConfig(raw: Record<string, unknown>, file = "config.json"): ModelConfig {
  const archs = Array.isArray(raw.architectures) ? (raw.architectures as string[]) : [];
  const byType: Record<string, Architecture> = { llama: "LlamaForCausalLM", qwen2: "Qwen2ForCausalLM", qwen3: "Qwen3ForCausalLM", mistral: "LlamaForCausalLM" };
  let architecture = archs.find((a): a is Architecture => (ARCHITECTURES as string[]).includes(a));
  if (!architecture && archs.includes("MistralForCausalLM")) architecture = "LlamaForCausalLM";
  if (!architecture && typeof raw.model_type === "string") architecture = byType[raw.model_type];
  if (!architecture) {
    throw new T2sError("unsupported_model", `${file}: architecture ${JSON.stringify(archs.length ? archs : raw.model_type)} is not supported; the kit runs ${ARCHITECTURES.join(", ")}`);
  }
  const hiddenSize = num(raw, "hidden_size", file);
  const numHeads = num(raw, "num_attention_heads", file);
  const numKvHeads = num(raw, "num_key_value_heads", file, numHeads);
  if (numHeads % numKvHeads !== 0) throw new T2sError("bad_config", `${file}: num_attention_heads ${numHeads} is not a multiple of num_key_value_heads ${numKvHeads}`);
  const headDim = num(raw, "head_dim", file, hiddenSize / numHeads);
  if (!Number.isInteger(headDim) || headDim % 2 !== 0) throw new T2sError("bad_config", `${file}: head_dim ${headDim} must be an even integer`);
  const rp = (raw.rope_parameters ?? raw.rope_scaling ?? {}) as Record<string, unknown>;
  const ropeTheta = num(raw, "rope_theta", file, typeof rp.rope_theta === "number" ? rp.rope_theta : 10000);
  const ropeType = String(rp.rope_type ?? rp.type ?? "default");
  let ropeScaling: RopeScaling;
  if (ropeType === "default") ropeScaling = { type: "default" };
  else if (ropeType === "llama3") {
    ropeScaling = {
      type: "llama3",
      factor: num(rp, "factor", `${file} rope`),
      lowFreqFactor: num(rp, "low_freq_factor", `${file} rope`),
      highFreqFactor: num(rp, "high_freq_factor", `${file} rope`),
      originalMaxPositions: num(rp, "original_max_position_embeddings", `${file} rope`),
    };
  } else if (ropeType === "linear") ropeScaling = { type: "linear", factor: num(rp, "factor", `${file} rope`) };
  else throw new T2sError("unsupported_model", `${file}: rope type "${ropeType}" is not supported (default, linear, llama3 are)`);
  const act = raw.hidden_act ?? "silu";
  if (act !== "silu") throw new T2sError("unsupported_model", `${file}: hidden_act "${String(act)}" is not supported (silu is)`);
  return {
    architecture,
    vocabSize: num(raw, "vocab_size", file),
    hiddenSize,
    intermediateSize: num(raw, "intermediate_size", file),
    numLayers: num(raw, "num_hidden_layers", file),
    numHeads,
    numKvHeads,
    headDim,
    rmsNormEps: num(raw, "rms_norm_eps", file, 1e-6),
    ropeTheta,
    ropeScaling,
    tieWordEmbeddings: raw.tie_word_embeddings === undefined ? architecture !== "LlamaForCausalLM" : raw.tie_word_embeddings === true,
    attentionBias: architecture === "Qwen2ForCausalLM" || raw.attention_bias === true,
    qkNorm: architecture === "Qwen3ForCausalLM",
    mlpBias: raw.mlp_bias === true,
    maxPositions: num(raw, "max_position_embeddings", file, 32768),
    eosTokenIds: ids(raw.eos_token_id),
    bosTokenId: typeof raw.bos_token_id === "number" ? raw.bos_token_id : null,
    padTokenId: typeof raw.pad_token_id === "number" ? raw.pad_token_id : null,
  };
}

/** Returns the decoder shape of a checkpoint folder from its config.json. */
export function readConfig(dir: string): ModelConfig {
  const file = join(dir, "config.json");
  if (!existsSync(file)) throw new T2sError("missing_file", `${dir} has no config.json (is it a Hugging Face model folder?)`);
  let raw: Record<string, unknown>;
  try {
    raw = JSON.parse(readFileSync(file, "utf8"));
  } catch (e) {
    throw new T2sError("bad_config", `${file}: not valid JSON (${(e as Error).message})`);
  }
  return parseConfig(raw, file);
}

/** Returns a config.json object (new layout) describing `c`, for writing random models. */
export function configToJson(c: ModelConfig): Record<string, unknown> {
  const modelType = { LlamaForCausalLM: "llama", Qwen2ForCausalLM: "qwen2", Qwen3ForCausalLM: "qwen3" }[c.architecture];
  const rope: Record<string, unknown> = { rope_theta: c.ropeTheta, rope_type: c.ropeScaling.type };
  if (c.ropeScaling.type === "llama3") {
    Object.assign(rope, { factor: c.ropeScaling.factor, low_freq_factor: c.ropeScaling.lowFreqFactor, high_freq_factor: c.ropeScaling.highFreqFactor, original_max_position_embeddings: c.ropeScaling.originalMaxPositions });
  } else if (c.ropeScaling.type === "linear") rope.factor = c.ropeScaling.factor;
  return {
    architectures: [c.architecture],
    model_type: modelType,
    vocab_size: c.vocabSize,
    hidden_size: c.hiddenSize,
    intermediate_size: c.intermediateSize,
    num_hidden_layers: c.numLayers,
    num_attention_heads: c.numHeads,
    num_key_value_heads: c.numKvHeads,
    head_dim: c.headDim,
    rms_norm_eps: c.rmsNormEps,
    rope_parameters: rope,
    tie_word_embeddings: c.tieWordEmbeddings,
    attention_bias: c.architecture === "Qwen2ForCausalLM" ? undefined : c.attentionBias,
    mlp_bias: c.mlpBias,
    max_position_embeddings: c.maxPositions,
    hidden_act: "silu",
    eos_token_id: c.eosTokenIds.length === 1 ? c.eosTokenIds[0] : c.eosTokenIds,
    bos_token_id: c.bosTokenId,
    pad_token_id: c.padTokenId,
  };
}

/** Returns the shape every tensor of a checkpoint must have for `c` (HF names). */
export function expectedShapes(c: ModelConfig): Map<string, number[]> {
  const m = new Map<string, number[]>();
  const D = c.hiddenSize;
  const qOut = c.numHeads * c.headDim;
  const kvOut = c.numKvHeads * c.headDim;
  m.set("model.embed_tokens.weight", [c.vocabSize, D]);
  m.set("model.norm.weight", [D]);
  if (!c.tieWordEmbeddings) m.set("lm_head.weight", [c.vocabSize, D]);
  for (let i = 0; i < c.numLayers; i++) {
    const p = `model.layers.${i}.`;
    m.set(`${p}input_layernorm.weight`, [D]);
    m.set(`${p}post_attention_layernorm.weight`, [D]);
    m.set(`${p}self_attn.q_proj.weight`, [qOut, D]);
    m.set(`${p}self_attn.k_proj.weight`, [kvOut, D]);
    m.set(`${p}self_attn.v_proj.weight`, [kvOut, D]);
    m.set(`${p}self_attn.o_proj.weight`, [D, qOut]);
    if (c.attentionBias) {
      m.set(`${p}self_attn.q_proj.bias`, [qOut]);
      m.set(`${p}self_attn.k_proj.bias`, [kvOut]);
      m.set(`${p}self_attn.v_proj.bias`, [kvOut]);
    }
    if (c.qkNorm) {
      m.set(`${p}self_attn.q_norm.weight`, [c.headDim]);
      m.set(`${p}self_attn.k_norm.weight`, [c.headDim]);
    }
    m.set(`${p}mlp.gate_proj.weight`, [c.intermediateSize, D]);
    m.set(`${p}mlp.up_proj.weight`, [c.intermediateSize, D]);
    m.set(`${p}mlp.down_proj.weight`, [D, c.intermediateSize]);
    if (c.mlpBias) {
      m.set(`${p}mlp.gate_proj.bias`, [c.intermediateSize]);
      m.set(`${p}mlp.up_proj.bias`, [c.intermediateSize]);
      m.set(`${p}mlp.down_proj.bias`, [D]);
    }
  }
  return m;
}
