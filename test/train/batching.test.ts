import { test } from "node:test";
import assert from "node:assert/strict";
import * as tf from "@tensorflow/tfjs-core";
import { TinyLM, useCpu } from "./tiny-lm.js";
import { batchTensors, firstScored, planMicroBatches } from "../../lib/train/batching.js";
import { sequenceLogprobs } from "../../lib/train/logprobs.js";
import { isT2sError } from "../../lib/core/errors.js";

await useCpu();

const row = (prompt: number, completion: number) => ({ ids: Array.from({ length: prompt + completion }, (_, i) => i % 5), mask: Array.from({ length: prompt + completion }, (_, i) => (i >= prompt ? 1 : 0)) });

test("micro-batches count only the scored span of each row against the cap", () => {
  // prompt 100 + completion 10: 10 scored positions (from 99 to 108) per row
  const rows = Array.from({ length: 6 }, () => row(100, 10));
  assert.equal(firstScored(rows[0]), 99);
  assert.deepEqual(planMicroBatches(rows, 10, { maxElements: 10 * 10 * 3 }), [[0, 1, 2], [3, 4, 5]]);
  assert.deepEqual(planMicroBatches(rows, 10, { maxElements: 10 ** 6, maxRows: 4 }), [[0, 1, 2, 3], [4, 5]]);
  // a row whose scored span alone is over the cap is an error naming the cap
  assert.throws(() => planMicroBatches([row(2, 50)], 10, { maxElements: 100 }), (e) => isT2sError(e, "tensor_cap") && /max_tensor_elements 100/.test(e.message));
});

test("rows with different prompt lengths widen the span to the earliest scored position", () => {
  const rows = [row(20, 5), row(10, 5)];
  // widths: row 0 alone 5; together from min(19, 9) = 9 to end 24 -> 15 x 2 rows
  assert.deepEqual(planMicroBatches(rows, 1, { maxElements: 29 }), [[0], [1]]);
  assert.deepEqual(planMicroBatches(rows, 1, { maxElements: 30 }), [[0, 1]]);
  const b = batchTensors(rows);
  assert.equal(b.from, 9);
  assert.deepEqual(b.mask.shape, [2, 15]);
  const m = b.mask.arraySync() as number[][];
  assert.equal(m[0].reduce((a, x) => a + x, 0), 5);
  assert.equal(m[0][10], 1, "row 0's first completion id (index 20) is column 20 - 1 - 9");
  assert.equal(m[1][0], 1, "row 1's first completion id (index 10) is column 0");
  assert.equal(b.tokens, 10);
  b.mask.dispose();
});

test("log-probs from a later position equal the matching columns of the full computation", () => {
  const lm = new TinyLM({ vocab: 6, dim: 3, maxLen: 8, seed: 1 });
  const ids = [[1, 2, 3, 4, 5, 0], [2, 2, 1, 0, 3, 4]];
  const d = tf.tidy(() => tf.max(tf.abs(tf.sub(sequenceLogprobs(lm, ids, { from: 2 }).logp, tf.slice(sequenceLogprobs(lm, ids).logp, [0, 2], [-1, -1])))).dataSync()[0]);
  assert.ok(d < 1e-6);
  lm.dispose();
});
