/**
 * What the chunked log-prob tests share, on whichever backend is active: a tiny random decoder trained with
 * LoRA (16-bit or float32 base) or every weight, scored as GRPO scores it (rows sharing a prompt prefix,
 * from the first scored position, an entropy), with the vocabulary projection whole and in chunks.
 */
import assert from "node:assert/strict";
import { tf } from "../../lib/backend/tf.js";
import { randomModel, tinyConfig } from "../../lib/model/random-model.js";
import { createAdapter } from "../../lib/model/lora.js";
import { ModelTrainable } from "../../lib/train/trainable-model.js";
import { sequenceLogprobs } from "../../lib/train/logprobs.js";
import { SeededRandom } from "../../lib/core/random.js";

export const VOCAB = 517;
const PREFIX = Array.from({ length: 18 }, (_, i) => (i * 37 + 11) % VOCAB);
/** Three rows sharing an 18-token prefix; 6 scored positions each from position 17: 18 positions in all. */
export const IDS = [[...PREFIX, 5, 17, 33, 2, 90, 41], [...PREFIX, 7, 7, 120, 64, 3, 0], [...PREFIX, 9, 8, 1, 44, 512, 6]];
export const FROM = PREFIX.length - 1;
export const SCORED = IDS.length * (IDS[0].length - 1 - FROM);
const WEIGHTS = [[0.3, -1, 0.5, 2, 1, -0.2], [1, 0.2, -0.4, 0.7, -2, 0.3], [0.5, 0.5, -1, 1, 0.1, 0.9]];

export type Mode = "lora" | "lora-bf16" | "full";

export interface Scored {
  loss: number;
  entropy: Float32Array;
  grads: Map<string, Float32Array>;
  /** The most values of any kernel output whose last axis is the vocabulary, forward and backward. */
  widestLogits: number;
}

/** A fresh tiny model and its trainable view (same seed every call, so every call starts from the same weights). */
export function tinyTrainable(mode: Mode, chunk: number, recompute = false): ModelTrainable {
  const config = tinyConfig({ vocabSize: VOCAB, hiddenSize: 32, intermediateSize: 48, numLayers: 2, numHeads: 4, numKvHeads: 2, headDim: 8 });
  const model = randomModel(config, { seed: 5, weightsDtype: mode === "lora-bf16" ? "bf16" : "fp32" });
  if (mode !== "full") createAdapter(model, { name: "train", r: 2, alpha: 4, targetModules: ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"], seed: 1 });
  const lm = new ModelTrainable(model, mode === "full" ? null : "train", { recompute, logitChunkTokens: chunk });
  // non-zero B, so every LoRA factor has a gradient
  const rng = new SeededRandom(3);
  for (const p of lm.trainableParams()) if (p.name.includes("lora_B")) p.variable.assign(tf.tensor(Array.from({ length: p.variable.size }, () => rng.normal() * 0.2), p.variable.shape));
  return lm;
}

/** The weighted sum of GRPO-style log-probs (temperature 0.7), its gradients, the entropies and the widest logits tensor seen. */
export async function score(lm: ModelTrainable): Promise<Scored> {
  const params = lm.trainableParams();
  const weights = tf.tensor2d(WEIGHTS);
  let entropy: tf.Tensor | undefined;
  let result: { value: tf.Scalar; grads: tf.NamedTensorMap } | undefined;
  const profile = await tf.profile(() => {
    result = tf.variableGrads(() => {
      const lp = sequenceLogprobs(lm, IDS, { temperature: 0.7, entropy: true, from: FROM });
      entropy = lp.entropy;
      return tf.sum(tf.mul(lp.logp, weights)) as tf.Scalar;
    }, params.map((p) => p.variable));
  });
  const { value, grads } = result!;
  let widestLogits = 0;
  // logits and their gradients: the head's products [positions, vocab] and every [rows, positions, vocab]
  // tensor (an embedding's gradient one-hot [tokens, vocab] is not logits, nor the head transposed)
  const logits = (name: string, s: number[]) => s[s.length - 1] === VOCAB && (s.length === 3 || (s.length === 2 && name === "BatchMatMul" && s[0] !== lm.hiddenSize));
  for (const k of profile.kernels) for (const s of k.outputShapes) if (s && logits(k.name, s)) widestLogits = Math.max(widestLogits, s.reduce((a, b) => a * b, 1));
  const out: Scored = { loss: (await value.data())[0], entropy: (await entropy!.data()) as Float32Array, grads: new Map(), widestLogits };
  for (const p of params) out.grads.set(p.name, (await grads[p.variable.name].data()) as Float32Array);
  tf.dispose([value, weights, entropy!, ...Object.values(grads)]);
  return out;
}

/** Largest |a - b| over the largest |b|. */
export function relDiff(a: Float32Array, b: Float32Array): number {
  assert.equal(a.length, b.length);
  let d = 0;
  let s = 0;
  for (let i = 0; i < a.length; i++) {
    d = Math.max(d, Math.abs(a[i] - b[i]));
    s = Math.max(s, Math.abs(b[i]));
  }
  return s === 0 ? d : d / s;
}

/**
 * Scores `mode` whole and in chunks of 1, 5 and 7 positions (none divides the 18 scored) and of 1,024 (all
 * in one), each with layers kept and recomputed, and checks every chunked run against the whole one: loss
 * and entropies within 1e-5, gradients within `tolerance` (relative), and no logits tensor larger than one
 * chunk's.
 */
export async function checkChunkedMatchesWhole(mode: Mode, tolerance = 1e-4): Promise<void> {
  const run = async (chunk: number, recompute: boolean) => {
    const lm = tinyTrainable(mode, chunk, recompute);
    try {
      return await score(lm);
    } finally {
      lm.model.dispose();
    }
  };
  const whole = await run(0, false);
  assert.equal(whole.widestLogits, SCORED * VOCAB, "the whole projection holds every scored position's logits");
  let nonzero = 0;
  for (const g of whole.grads.values()) if (g.some((v) => v !== 0)) nonzero++;
  assert.ok(nonzero > whole.grads.size / 2, "most gradients are non-zero");
  for (const chunk of [1, 5, 7, 1024]) {
    for (const recompute of [false, true]) {
      const label = `${mode}, chunks of ${chunk}${recompute ? ", layers recomputed" : ""}`;
      const r = await run(chunk, recompute);
      assert.ok(Math.abs(r.loss - whole.loss) <= 1e-5 * Math.abs(whole.loss), `${label}: loss ${r.loss} vs ${whole.loss}`);
      assert.ok(relDiff(r.entropy, whole.entropy) <= 1e-5, `${label}: entropies`);
      assert.equal(r.grads.size, whole.grads.size);
      for (const [name, g] of whole.grads) assert.ok(relDiff(r.grads.get(name)!, g) <= tolerance, `${label}, ${name}: relative difference ${relDiff(r.grads.get(name)!, g)}`);
      assert.ok(r.widestLogits <= chunk * VOCAB, `${label}: a logits tensor of ${r.widestLogits} values`);
    }
  }
}
