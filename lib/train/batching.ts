/**
 * Micro-batches: rows are grouped (longest first, so padding is small) so that no micro-batch's logits
 * tensor [B, T, vocab] holds more than `maxElements` values; WebGPU cannot bind a buffer over 2 GiB, and
 * the CPU backends need the memory to stay bounded too. Rows are right-padded.
 */
import * as tf from "@tensorflow/tfjs-core";
import { T2sError } from "../errors.js";

/** A training row: token ids, and a 0/1 per id saying whether that id is scored (a generated token). */
export interface TokenRow {
  ids: number[];
  /** Same length as ids: 1 where the id is trained on (scored given its prefix), 0 for prompt/tool/pad. */
  mask: number[];
  /** Optional, same length as ids: the sampler's log-prob of each generated id (NaN where unknown). */
  logprobs?: number[];
}

export interface BatchLimits {
  /** Largest number of logits values (B x (T - 1) x vocab) in one micro-batch. */
  maxElements: number;
  /** Largest number of rows in one micro-batch (0 = no limit). */
  maxRows?: number;
}

/** Returns micro-batches as lists of row indices, longest rows first, each within the limits. */
export function planMicroBatches(lengths: number[], vocab: number, limits: BatchLimits): number[][] {
  const order = lengths.map((_, i) => i).sort((a, b) => lengths[b] - lengths[a] || a - b);
  const out: number[][] = [];
  let cur: number[] = [];
  let width = 0;
  for (const i of order) {
    const t = Math.max(1, lengths[i] - 1);
    if (t * vocab > limits.maxElements) {
      throw new T2sError("tensor_cap", `a row of ${lengths[i]} tokens needs ${t * vocab} logits values, above max_tensor_elements ${limits.maxElements}; lower the token budget or raise the cap`);
    }
    const w = cur.length ? width : t;
    const full = (cur.length + 1) * w * vocab > limits.maxElements || (limits.maxRows ? cur.length >= limits.maxRows : false);
    if (cur.length && full) {
      out.push(cur);
      cur = [];
    }
    if (!cur.length) width = t;
    cur.push(i);
  }
  if (cur.length) out.push(cur);
  return out;
}

export interface BatchTensors {
  /** B rows of T ids, right-padded with `pad`. */
  ids: number[][];
  /** [B, T - 1] float mask: entry t says whether ids[:, t + 1] is in the loss. */
  mask: tf.Tensor2D;
  /** Active tokens in the mask. */
  tokens: number;
  /** [B, T - 1] sampler log-probs aligned with `mask`, and where they are known (rows that carry them). */
  sampled: { logp: tf.Tensor2D; mask: tf.Tensor2D } | null;
}

/** Pads the rows and builds the loss mask (a tensor the caller disposes); `rowScale[i]` multiplies row i's mask (0 drops it). */
export function batchTensors(rows: TokenRow[], rowScale?: number[], pad = 0): BatchTensors {
  const T = Math.max(2, ...rows.map((r) => r.ids.length));
  const mask = new Float32Array(rows.length * (T - 1));
  let tokens = 0;
  const ids = rows.map((r, b) => {
    if (r.mask.length !== r.ids.length) throw new Error(`row ${b}: mask has ${r.mask.length} entries for ${r.ids.length} ids`);
    return [...r.ids, ...new Array<number>(T - r.ids.length).fill(pad)];
  });
  rows.forEach((r, b) => {
    const s = rowScale ? rowScale[b] : 1;
    for (let t = 1; t < r.ids.length; t++) {
      const m = r.mask[t] * s;
      mask[b * (T - 1) + t - 1] = m;
      tokens += m;
    }
  });
  let sampled: BatchTensors["sampled"] = null;
  if (rows.some((r) => r.logprobs)) {
    const lp = new Float32Array(rows.length * (T - 1));
    const known = new Float32Array(rows.length * (T - 1));
    rows.forEach((r, b) => {
      if (!r.logprobs) return;
      for (let t = 1; t < r.ids.length; t++) {
        const v = r.logprobs[t];
        if (r.mask[t] && Number.isFinite(v)) {
          lp[b * (T - 1) + t - 1] = v;
          known[b * (T - 1) + t - 1] = 1;
        }
      }
    });
    sampled = { logp: tf.tensor2d(lp, [rows.length, T - 1]), mask: tf.tensor2d(known, [rows.length, T - 1]) };
  }
  return { ids, mask: tf.tensor2d(mask, [rows.length, T - 1]), tokens, sampled };
}
