/**
 * Loading a Hugging Face model folder (config.json, safetensors weights, tokenizer.json, chat template)
 * into a CausalLM, and building one from named float32 tensors (random models, tests, benchmarks).
 */
import { existsSync } from "node:fs";
import { basename, resolve } from "node:path";
import { T2sError } from "../core/errors.js";
import { useBackend } from "../backend/select.js";
import { readConfig, type ModelConfig } from "./config.js";
import type { DecoderWeights, LayerWeights, Linear } from "./decoder.js";
import { CausalLM } from "./model.js";
import { readCheckpoint, type FloatTensor } from "./safetensors.js";
import { tf } from "../backend/tf.js";
import { loadTokenizer, type ChatTokenizer } from "./tokenizer.js";

export interface LoadOptions {
  /** tfjs backend: auto (default, or T2S_BACKEND), webgpu, tensorflow, wasm, cpu. */
  backend?: string;
  /** Name the model is served under (default: the folder's base name). */
  name?: string;
  /** Longest prompt + completion allowed (default: config.json's max_position_embeddings). */
  contextLength?: number;
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

/**
 * Returns decoder weights built from HF-named float32 tensors, checking every tensor's presence and shape
 * (`source` names the folder in errors). Tensors the decoder does not use (rotary buffers) are ignored.
 */
export function buildWeights(c: ModelConfig, named: Map<string, FloatTensor | { shape: number[]; data: Float32Array }>, source: string): DecoderWeights {
  const shapes = expectedShapes(c);
  if (c.tieWordEmbeddings && named.has("lm_head.weight")) shapes.set("lm_head.weight", [c.vocabSize, c.hiddenSize]);
  for (const [name, shape] of shapes) {
    const t = named.get(name);
    if (!t) throw new T2sError("bad_checkpoint", `${source}: tensor ${name} is missing (config.json describes a ${c.architecture} with ${c.numLayers} layers)`);
    if (t.shape.length !== shape.length || t.shape.some((d, i) => d !== shape[i])) {
      throw new T2sError("bad_checkpoint", `${source}: tensor ${name} has shape [${t.shape}] but config.json implies [${shape}]`);
    }
  }
  const get = (name: string) => {
    const t = named.get(name)!;
    return tf.tensor(t.data, t.shape);
  };
  const lin = (p: string, bias: boolean): Linear => ({ weight: get(`${p}.weight`) as tf.Tensor2D, bias: bias ? (get(`${p}.bias`) as tf.Tensor1D) : undefined });
  const layers: LayerWeights[] = [];
  for (let i = 0; i < c.numLayers; i++) {
    const p = `model.layers.${i}.`;
    layers.push({
      inputNorm: get(`${p}input_layernorm.weight`) as tf.Tensor1D,
      postNorm: get(`${p}post_attention_layernorm.weight`) as tf.Tensor1D,
      q: lin(`${p}self_attn.q_proj`, c.attentionBias),
      k: lin(`${p}self_attn.k_proj`, c.attentionBias),
      v: lin(`${p}self_attn.v_proj`, c.attentionBias),
      o: lin(`${p}self_attn.o_proj`, false),
      gate: lin(`${p}mlp.gate_proj`, c.mlpBias),
      up: lin(`${p}mlp.up_proj`, c.mlpBias),
      down: lin(`${p}mlp.down_proj`, c.mlpBias),
      qNorm: c.qkNorm ? (get(`${p}self_attn.q_norm.weight`) as tf.Tensor1D) : undefined,
      kNorm: c.qkNorm ? (get(`${p}self_attn.k_norm.weight`) as tf.Tensor1D) : undefined,
    });
  }
  return {
    embed: get("model.embed_tokens.weight") as tf.Tensor2D,
    layers,
    norm: get("model.norm.weight") as tf.Tensor1D,
    // a tied checkpoint may still carry lm_head; the embeddings are what transformers uses then
    lmHead: c.tieWordEmbeddings ? undefined : (get("lm_head.weight") as tf.Tensor2D),
  };
}

/**
 * Throws T2sError("no_tokenizer") when a model folder that is to chat (serve, benchmark, train) has no
 * tokenizer.json: said as such, before the model loads, rather than as a missing chat template later.
 */
export function assertTokenizerFile(dir: string): void {
  const abs = resolve(dir);
  // a folder that is not a model at all is loadModel's to report (no config.json)
  if (existsSync(resolve(abs, "config.json")) && !existsSync(resolve(abs, "tokenizer.json"))) {
    throw new T2sError("no_tokenizer", `model folder ${dir} has no tokenizer.json; copy the tokenizer files (tokenizer.json, tokenizer_config.json) of the model into it`);
  }
}

/** Loads a Hugging Face model folder and returns the model on the chosen backend (model.backend says which). */
export async function loadModel(dir: string, opts: LoadOptions = {}): Promise<CausalLM> {
  const abs = resolve(dir);
  if (!existsSync(abs)) throw new T2sError("missing_file", `model folder ${dir} does not exist`);
  const choice = await useBackend(opts.backend);
  const config = readConfig(abs);
  if (opts.contextLength !== undefined) {
    if (!Number.isInteger(opts.contextLength) || opts.contextLength < 1) throw new T2sError("usage", `context length must be a positive integer, got ${opts.contextLength}`);
    config.maxPositions = opts.contextLength;
  }
  const tokenizer: ChatTokenizer | null = existsSync(resolve(abs, "tokenizer.json")) ? loadTokenizer(abs, config.eosTokenIds) : null;
  const named = readCheckpoint(abs);
  const weights = buildWeights(config, named, abs);
  return new CausalLM(config, weights, tokenizer, { name: opts.name ?? basename(abs), dir: abs, backend: choice.backend });
}
