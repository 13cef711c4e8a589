/**
 * A randomly initialised decoder written as a Hugging Face folder (config.json + model.safetensors), the
 * starting point of SFT from scratch. Values come from a seeded mulberry32 stream (Box-Muller normals),
 * not from the tfjs backend, so the same seed gives the same bytes on every machine.
 */
import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { configToJson, type ModelConfig } from "../model/config.js";
import { expectedShapes } from "../model/load.js";
import { writeSafetensors } from "../model/safetensors.js";
import { SeededRandom } from "../core/random.js";
import { T2sError } from "../core/errors.js";

export interface ModelShape {
  hiddenSize: number;
  numLayers: number;
  numHeads: number;
  numKvHeads: number;
  intermediateSize: number;
  vocabSize: number;
  maxPositions: number;
}

/** Returns a Qwen2 config (q/k/v bias, tied embeddings) of the given shape with ChatML's token ids (pad 0, eos 2). */
export function qwen2Config(s: ModelShape): ModelConfig {
  if (s.hiddenSize % s.numHeads !== 0) throw new T2sError("bad_value", `hidden size ${s.hiddenSize} is not a multiple of ${s.numHeads} heads`);
  if (s.numHeads % s.numKvHeads !== 0) throw new T2sError("bad_value", `${s.numHeads} heads are not a multiple of ${s.numKvHeads} key/value heads`);
  return {
    architecture: "Qwen2ForCausalLM", vocabSize: s.vocabSize, hiddenSize: s.hiddenSize, intermediateSize: s.intermediateSize,
    numLayers: s.numLayers, numHeads: s.numHeads, numKvHeads: s.numKvHeads, headDim: s.hiddenSize / s.numHeads,
    rmsNormEps: 1e-6, ropeTheta: 10000, ropeScaling: { type: "default" }, tieWordEmbeddings: true, attentionBias: true, qkNorm: false, mlpBias: false,
    maxPositions: s.maxPositions, eosTokenIds: [2], bosTokenId: null, padTokenId: 0,
  };
}

/** Returns the number of parameters of a config (tied embeddings counted once). */
export function parameterCount(c: ModelConfig): number {
  let n = 0;
  for (const shape of expectedShapes(c).values()) n += shape.reduce((a, b) => a * b, 1);
  return n;
}

/**
 * Returns HF-named float32 tensors drawn with `seed`: weights ~ N(0, std) (transformers' init, std 0.02),
 * residual output projections (o_proj, down_proj) scaled by 1/sqrt(2 x layers) as in GPT-2, biases 0,
 * norms 1.
 */
export function initialWeights(c: ModelConfig, seed: number, std = 0.02): Map<string, { shape: number[]; data: Float32Array }> {
  const rand = new SeededRandom(seed);
  const normal = () => {
    // not rand.normal(): the default model's weights were drawn with this clamp, and are pinned
    const u = Math.max(rand.next(), 1e-12);
    return Math.sqrt(-2 * Math.log(u)) * Math.cos(2 * Math.PI * rand.next());
  };
  const out = new Map<string, { shape: number[]; data: Float32Array }>();
  const residualStd = std / Math.sqrt(2 * c.numLayers);
  for (const [name, shape] of expectedShapes(c)) {
    const data = new Float32Array(shape.reduce((a, b) => a * b, 1));
    if (name.endsWith("norm.weight")) data.fill(1);
    else if (!name.endsWith(".bias")) {
      const s = /o_proj|down_proj/.test(name) ? residualStd : std;
      for (let i = 0; i < data.length; i++) data[i] = normal() * s;
    }
    out.set(name, { shape, data });
  }
  return out;
}

/** Writes config.json, generation_config.json and model.safetensors for a fresh model into `dir`; returns the parameter count. */
export function writeInitialModel(dir: string, c: ModelConfig, seed: number): number {
  mkdirSync(dir, { recursive: true });
  const json = { ...configToJson(c), torch_dtype: "float32", use_sliding_window: false };
  writeFileSync(join(dir, "config.json"), JSON.stringify(json, null, 2) + "\n");
  writeFileSync(join(dir, "generation_config.json"), JSON.stringify({ eos_token_id: c.eosTokenIds, pad_token_id: c.padTokenId, bos_token_id: c.bosTokenId }, null, 2) + "\n");
  writeSafetensors(join(dir, "model.safetensors"), initialWeights(c, seed), { metadata: { init_seed: String(seed) } });
  return parameterCount(c);
}
