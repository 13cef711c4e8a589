/**
 * The model shapes researchers bring, as config.json describes them (Hugging Face's published configs):
 * benches take `--shape NAME [--vocab N]`, and scripts/gpu/make_checkpoints.py writes random-weight
 * checkpoints of the same shapes with transformers for the episode-level runs on a GPU host.
 */
import { T2sError } from "../core/errors.js";
import type { ModelConfig } from "./config.js";

const qwen2 = (o: Pick<ModelConfig, "hiddenSize" | "intermediateSize" | "numLayers" | "numHeads" | "numKvHeads"> & Partial<ModelConfig>): ModelConfig => ({
  architecture: "Qwen2ForCausalLM", vocabSize: 151936, headDim: 128, rmsNormEps: 1e-6, ropeTheta: 1000000, ropeScaling: { type: "default" },
  tieWordEmbeddings: true, attentionBias: true, qkNorm: false, mlpBias: false, maxPositions: 32768, eosTokenIds: [151645], bosTokenId: null, padTokenId: 151643, ...o,
});

const llama32 = (o: Pick<ModelConfig, "hiddenSize" | "numLayers" | "numHeads" | "headDim">): ModelConfig => ({
  architecture: "LlamaForCausalLM", vocabSize: 128256, intermediateSize: 8192, numKvHeads: 8, rmsNormEps: 1e-5, ropeTheta: 500000,
  ropeScaling: { type: "llama3", factor: 32, lowFreqFactor: 1, highFreqFactor: 4, originalMaxPositions: 8192 },
  tieWordEmbeddings: true, attentionBias: false, qkNorm: false, mlpBias: false, maxPositions: 131072, eosTokenIds: [128001, 128008, 128009], bosTokenId: 128000, padTokenId: null, ...o,
});

/** Shape name -> config (vocabulary as published; `withVocab` swaps it). */
export const MODEL_SHAPES: Record<string, () => ModelConfig> = {
  "qwen2.5-0.5b": () => qwen2({ hiddenSize: 896, intermediateSize: 4864, numLayers: 24, numHeads: 14, numKvHeads: 2, headDim: 64 }),
  "qwen2.5-1.5b": () => qwen2({ hiddenSize: 1536, intermediateSize: 8960, numLayers: 28, numHeads: 12, numKvHeads: 2 }),
  "qwen2.5-3b": () => qwen2({ hiddenSize: 2048, intermediateSize: 11008, numLayers: 36, numHeads: 16, numKvHeads: 2 }),
  "qwen2.5-7b": () => qwen2({ hiddenSize: 3584, intermediateSize: 18944, numLayers: 28, numHeads: 28, numKvHeads: 4, vocabSize: 152064, tieWordEmbeddings: false }),
  "llama3.2-1b": () => llama32({ hiddenSize: 2048, numLayers: 16, numHeads: 32, headDim: 64 }),
  "llama3.2-3b": () => llama32({ hiddenSize: 3072, numLayers: 28, numHeads: 24, headDim: 128 }),
  "qwen3-4b": () => ({
    ...qwen2({ hiddenSize: 2560, intermediateSize: 9728, numLayers: 36, numHeads: 32, numKvHeads: 8 }),
    architecture: "Qwen3ForCausalLM", attentionBias: false, qkNorm: true, maxPositions: 40960,
  }),
};

/** The config of shape `name`, with the vocabulary replaced when `vocab` is given. */
export function shapeConfig(name: string, vocab?: number): ModelConfig {
  const make = MODEL_SHAPES[name];
  if (!make) throw new T2sError("usage", `unknown shape '${name}'; one of ${Object.keys(MODEL_SHAPES).join(", ")}`);
  const c = make();
  if (vocab !== undefined) {
    if (!Number.isInteger(vocab) || vocab < 2) throw new T2sError("usage", `--vocab must be an integer >= 2, got ${vocab}`);
    return { ...c, vocabSize: vocab, eosTokenIds: c.eosTokenIds.filter((id) => id < vocab), padTokenId: c.padTokenId !== null && c.padTokenId < vocab ? c.padTokenId : null, bosTokenId: c.bosTokenId !== null && c.bosTokenId < vocab ? c.bosTokenId : null };
  }
  return c;
}

/** Parameters of a shape (embeddings and head included). */
export function shapeParams(c: ModelConfig): number {
  const D = c.hiddenSize;
  const layer = D * (c.numHeads + 2 * c.numKvHeads) * c.headDim + c.numHeads * c.headDim * D + 3 * D * c.intermediateSize + 2 * D + (c.attentionBias ? (c.numHeads + 2 * c.numKvHeads) * c.headDim : 0) + (c.qkNorm ? 2 * c.headDim : 0);
  return c.numLayers * layer + c.vocabSize * D * (c.tieWordEmbeddings ? 1 : 2) + D;
}
