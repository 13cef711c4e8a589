/**
 * Log-probs projected onto the vocabulary a chunk of positions at a time (logit_chunk_tokens,
 * lib/train/chunked-logprobs.ts) equal the whole projection's on the CPU and wasm backends: loss, entropies
 * and the gradients of LoRA pairs (float32 and 16-bit bases) and of every weight (a tied head included),
 * with chunk sizes that do not divide the scored positions, layers kept or recomputed; and no tensor of
 * logits (or of their gradient) larger than one chunk's is ever made. test/backend/chunked-logprobs.test.ts
 * checks the same on WebGPU.
 */
import { test } from "node:test";
import { useBackend } from "../../lib/backend/select.js";
import { ensureGradients } from "../../lib/backend/gradients.js";
import assert from "node:assert/strict";
import { tf } from "../../lib/backend/tf.js";
import { packDense } from "../../lib/model/packed.js";
import { chunkedTargetLogprobs } from "../../lib/train/chunked-logprobs.js";
import { SeededRandom } from "../../lib/core/random.js";
import { checkChunkedMatchesWhole, relDiff } from "./chunked-support.js";

ensureGradients();

for (const backend of ["cpu", "wasm"] as const) {
  for (const mode of ["lora", "lora-bf16", "full"] as const) {
    test(`${backend}: chunked log-probs give the whole projection's loss and ${mode} gradients`, async () => {
      await useBackend(backend);
      await checkChunkedMatchesWhole(mode);
    });
  }
}

test("a 16-bit head widened in blocks of vocabulary rows gives the whole head's log-probs and hidden-state gradient", async () => {
  await useBackend("cpu");
  const V = 37;
  const D = 6;
  const rng = new SeededRandom(4);
  const wide = tf.tensor2d(Array.from({ length: V * D }, () => rng.normal()), [V, D]);
  const head = packDense(tf.clone(wide));
  const hidden = tf.tensor3d(Array.from({ length: 2 * 5 * D }, () => rng.normal()), [2, 5, D]);
  const targets = [[1, 36, 0, 17, 5], [2, 2, 30, 9, 11]];
  const run = (block: number) => {
    const g = tf.grad((h: tf.Tensor) => tf.sum(chunkedTargetLogprobs(h as tf.Tensor3D, head, targets, 3, 0.7, false, block).logp))(hidden);
    const lp = chunkedTargetLogprobs(hidden, head, targets, 3, 0.7, false, block).logp;
    return { lp: lp.dataSync() as Float32Array, g: g.dataSync() as Float32Array };
  };
  // blocks of 2 rows x 6 values: 19 widened blocks, the last of one row; the default widens the head whole
  const blocks = run(12);
  const whole = run(V * D);
  assert.ok(relDiff(blocks.lp, whole.lp) < 1e-6, "log-probs");
  assert.ok(relDiff(blocks.g, whole.g) < 1e-6, "gradient of the hidden states");
  tf.dispose([wide, hidden]);
  head.dispose();
});
