/**
 * Micro-batches: rows are grouped (longest first, so padding is small) so that no micro-batch's scored
 * tensor [B, T, width] holds more than `maxElements` values (width: the vocabulary for whole logits, the
 * hidden size when the learner projects positions in chunks, logprobs.ts scoredWidth); WebGPU cannot bind a
 * buffer over 2 GiB, and the CPU backends need the memory to stay bounded too. Rows are right-padded.
 */
import { tf } from "../backend/tf.js";
import { T2sError } from "../core/errors.js";

/** A training row: token ids, and a 0/1 per id saying whether that id is scored (a generated token). */
export interface TokenRow {
  ids: number[];
  /** Same length as ids: 1 where the id is trained on (scored given its prefix), 0 for prompt/tool/pad. */
  mask: number[];
  /** Optional, same length as ids: the sampler's log-prob of each generated id (NaN where unknown). */
  logprobs?: number[];
}

export interface BatchLimits {
  /** Largest number of scored values (B x (T - 1) x width) in one micro-batch. */
  maxElements: number;
  /** Largest number of rows in one micro-batch (0 = no limit). */
  maxRows?: number;
}

/** The first logits position a row needs: the one that scores its first masked id (0 when none is). */
export function firstScored(row: TokenRow): number {
  const k = row.mask.findIndex((m, t) => t >= 1 && m > 0);
  return k < 0 ? Math.max(0, row.ids.length - 2) : k - 1;
}

/**
 * Returns micro-batches as lists of row indices, longest rows first, each within the limits. A
 * micro-batch's logits span from its rows' earliest scored position to its longest row's end.
 */
export function planMicroBatches(rows: TokenRow[], width: number, limits: BatchLimits): number[][] {
  const vocab = width;
  const len = rows.map((r) => r.ids.length);
  const start = rows.map(firstScored);
  const order = len.map((_, i) => i).sort((a, b) => len[b] - len[a] || a - b);
  const out: number[][] = [];
  let cur: number[] = [];
  let end = 0;
  let from = 0;
  for (const i of order) {
    const own = Math.max(1, len[i] - 1 - start[i]);
    if (own * vocab > limits.maxElements) {
      throw new T2sError("tensor_cap", `a row scoring ${own} positions needs ${own * vocab} values (${vocab} per position), above max_tensor_elements ${limits.maxElements}; lower the token budget or raise the cap`);
    }
    const width = cur.length ? Math.max(1, end - Math.min(from, start[i])) : own;
    const full = (cur.length + 1) * width * vocab > limits.maxElements || (limits.maxRows ? cur.length >= limits.maxRows : false);
    if (cur.length && full) {
      out.push(cur);
      cur = [];
    }
    if (!cur.length) {
      end = Math.max(1, len[i] - 1);
      from = start[i];
    }
    from = Math.min(from, start[i]);
    cur.push(i);
  }
  if (cur.length) out.push(cur);
  return out;
}

export interface BatchTensors {
  /** B rows of T ids, right-padded with `pad`. */
  ids: number[][];
  /** First logits position any row scores (pass it to sequenceLogprobs). */
  from: number;
  /** [B, T - 1 - from] float mask: column j says whether ids[:, from + j + 1] is in the loss. */
  mask: tf.Tensor2D;
  /** Active tokens in the mask. */
  tokens: number;
  /** Sampler log-probs aligned with `mask`, and where they are known (rows that carry them). */
  sampled: { logp: tf.Tensor2D; mask: tf.Tensor2D } | null;
}

/** Pads the rows and builds the loss mask (a tensor the caller disposes); `rowScale[i]` multiplies row i's mask (0 drops it). */
export function batchTensors(rows: TokenRow[], rowScale?: number[], pad = 0): BatchTensors {
  const T = Math.max(2, ...rows.map((r) => r.ids.length));
  const from = Math.min(T - 2, ...rows.map(firstScored));
  const W = T - 1 - from;
  const mask = new Float32Array(rows.length * W);
  let tokens = 0;
  const ids = rows.map((r, b) => {
    if (r.mask.length !== r.ids.length) throw new Error(`row ${b}: mask has ${r.mask.length} entries for ${r.ids.length} ids`);
    return [...r.ids, ...new Array<number>(T - r.ids.length).fill(pad)];
  });
  rows.forEach((r, b) => {
    const s = rowScale ? rowScale[b] : 1;
    for (let t = from + 1; t < r.ids.length; t++) {
      const m = r.mask[t] * s;
      mask[b * W + t - 1 - from] = m;
      tokens += m;
    }
  });
  let sampled: BatchTensors["sampled"] = null;
  if (rows.some((r) => r.logprobs)) {
    const lp = new Float32Array(rows.length * W);
    const known = new Float32Array(rows.length * W);
    rows.forEach((r, b) => {
      if (!r.logprobs) return;
      for (let t = from + 1; t < r.ids.length; t++) {
        const v = r.logprobs[t];
        if (r.mask[t] && Number.isFinite(v)) {
          lp[b * W + t - 1 - from] = v;
          known[b * W + t - 1 - from] = 1;
        }
      }
    });
    sampled = { logp: tf.tensor2d(lp, [rows.length, W]), mask: tf.tensor2d(known, [rows.length, W]) };
  }
  return { ids, from, mask: tf.tensor2d(mask, [rows.length, W]), tokens, sampled };
}
