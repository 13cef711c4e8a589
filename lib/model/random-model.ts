/**
 * Random models of any supported shape, for benchmarks and tests that need no checkpoint: weights drawn
 * from a seeded normal (std 0.02 like transformers' init, norms at 1), built directly on the active
 * backend.
 */
import type { ModelConfig } from "./config.js";
import { MODEL_SHAPES } from "./shapes.js";
import { packDense, PackedWeight, type WeightMatrix } from "./packed.js";
import type { DecoderWeights, LayerWeights, Linear } from "./decoder.js";
import { CausalLM } from "./model.js";
import { tf } from "../backend/tf.js";
import { MAX_BINDING_BYTES } from "../backend/gpu-pool.js";
import type { ChatTokenizer } from "./tokenizer.js";

/** Returns the config of a Qwen2-0.5B-shaped model (494M parameters, tied embeddings). */
export function qwen2HalfBConfig(): ModelConfig {
  return MODEL_SHAPES["qwen2.5-0.5b"]();
}

/** Returns a small Llama-shaped config (hidden 128, 2 layers, GQA 4/2, vocab 2048) for quick CPU runs. */
export function tinyConfig(overrides: Partial<ModelConfig> = {}): ModelConfig {
  return {
    architecture: "LlamaForCausalLM", vocabSize: 2048, hiddenSize: 128, intermediateSize: 344, numLayers: 2, numHeads: 4, numKvHeads: 2, headDim: 32,
    rmsNormEps: 1e-6, ropeTheta: 10000, ropeScaling: { type: "default" }, tieWordEmbeddings: false, attentionBias: false, qkNorm: false, mlpBias: false,
    maxPositions: 4096, eosTokenIds: [], bosTokenId: null, padTokenId: 0, ...overrides,
  };
}

/** A copy of a tensor in a buffer of its own (tf.clone would share the buffer); int32 words stay exact. */
function deviceCopy<T extends tf.Tensor>(t: T): T {
  return tf.mul(t, tf.scalar(1, t.dtype)) as T;
}

/** A device copy of a weight matrix (same storage, its own buffer). */
function copyMatrix(w: WeightMatrix): WeightMatrix {
  return w instanceof PackedWeight ? new PackedWeight(deviceCopy(w.words), w.shape, w.dtype) : deviceCopy(w);
}

/** A device copy of a decoder layer's weights. */
function copyLayer(l: LayerWeights): LayerWeights {
  const vec = (v: tf.Tensor1D | undefined) => (v ? deviceCopy(v) : undefined);
  const lin = (x: Linear): Linear => ({ weight: copyMatrix(x.weight), bias: vec(x.bias) });
  return { inputNorm: vec(l.inputNorm)!, postNorm: vec(l.postNorm)!, q: lin(l.q), k: lin(l.k), v: lin(l.v), o: lin(l.o), gate: lin(l.gate), up: lin(l.up), down: lin(l.down), qNorm: vec(l.qNorm), kNorm: vec(l.kNorm) };
}

/**
 * Returns a model with random weights of the given shape (no tokenizer unless given). With `copyLayers`,
 * the layers after the first are device copies of it and an untied LM head a copy of the embedding: every
 * step reads as many distinct bytes as a real model's, but only one layer is drawn on the host, so a 7B
 * decode bench builds in about a minute instead of many.
 */
export function randomModel(c: ModelConfig, opts: { seed?: number; name?: string; tokenizer?: ChatTokenizer; backend?: string; weightsDtype?: "fp32" | "bf16"; copyLayers?: boolean } = {}): CausalLM {
  let seed = opts.seed ?? 0;
  const normal = (shape: number[], std = 0.02) => tf.randomNormal(shape, 0, std, "float32", seed++);
  const ones = (n: number) => tf.ones([n]) as tf.Tensor1D;
  // bf16: each matrix drawn in float32, then rounded and packed on the device (as a bf16 checkpoint loads),
  // in row blocks whose float32 form a kernel can read whole (7B's embedding is 2.2 GB in float32)
  const packed = (rows: number, cols: number): PackedWeight => {
    const block = Math.floor(MAX_BINDING_BYTES / (4 * cols));
    if (rows <= block) return packDense(normal([rows, cols]) as tf.Tensor2D);
    const parts: PackedWeight[] = [];
    for (let r = 0; r < rows; r += block) parts.push(packDense(normal([Math.min(block, rows - r), cols]) as tf.Tensor2D));
    const words = tf.concat(parts.map((p) => p.words)) as tf.Tensor2D;
    parts.forEach((p) => p.dispose());
    return new PackedWeight(words, [rows, cols], "bf16");
  };
  const matrix = ([rows, cols]: [number, number]): WeightMatrix => (opts.weightsDtype === "bf16" ? packed(rows, cols) : (normal([rows, cols]) as tf.Tensor2D));
  const lin = (out: number, inp: number, bias: boolean): Linear => ({ weight: matrix([out, inp]), bias: bias ? (normal([out]) as tf.Tensor1D) : undefined });
  const q = c.numHeads * c.headDim;
  const kv = c.numKvHeads * c.headDim;
  const layers: LayerWeights[] = [];
  for (let i = 0; i < c.numLayers; i++) {
    if (opts.copyLayers && i > 0) {
      layers.push(copyLayer(layers[0]));
      continue;
    }
    layers.push({
      inputNorm: ones(c.hiddenSize),
      postNorm: ones(c.hiddenSize),
      q: lin(q, c.hiddenSize, c.attentionBias),
      k: lin(kv, c.hiddenSize, c.attentionBias),
      v: lin(kv, c.hiddenSize, c.attentionBias),
      o: lin(c.hiddenSize, q, false),
      gate: lin(c.intermediateSize, c.hiddenSize, c.mlpBias),
      up: lin(c.intermediateSize, c.hiddenSize, c.mlpBias),
      down: lin(c.hiddenSize, c.intermediateSize, c.mlpBias),
      qNorm: c.qkNorm ? ones(c.headDim) : undefined,
      kNorm: c.qkNorm ? ones(c.headDim) : undefined,
    });
  }
  const embed = matrix([c.vocabSize, c.hiddenSize]);
  const weights: DecoderWeights = {
    embed,
    layers,
    norm: ones(c.hiddenSize),
    lmHead: c.tieWordEmbeddings ? undefined : opts.copyLayers ? copyMatrix(embed) : matrix([c.vocabSize, c.hiddenSize]),
  };
  return new CausalLM(c, weights, opts.tokenizer ?? null, { name: opts.name ?? "random", dir: null, backend: opts.backend ?? tf.getBackend() });
}
