/**
 * The fused causal attention (lib/backend/webgpu/train/attention-train.ts) against the decoder's ops path
 * (attentionBias + attendChunk in lib/model/decoder.ts) on the same inputs: the context, the gradients of
 * q, k and v, the time of forward alone and of forward + backward, and the dispatches of each path.
 * Small shapes run on a software adapter; --qwen05b runs the attention of a Qwen2-0.5B training step
 * (B 4, 14 heads, 2 kv heads, head 64): T 256 after a broadcast 256-token prompt prefix, and T 512 alone.
 */
import { tf } from "../../lib/backend/tf.js";
import { ensureGradients } from "../../lib/backend/gradients.js";
import { attentionFused } from "../../lib/backend/webgpu/train/attention-train.js";
import type { AttentionDims } from "../../lib/backend/webgpu/train/attention-train-wgsl.js";
import { fusedKernelsActive, useFusedKernels } from "../../lib/backend/webgpu/train/fused.js";
import { attendChunk, attentionBias } from "../../lib/model/attention.js";
import { countDispatches } from "../dispatches.js";
import { bothPaths, relativeError, timePath, type KernelCheck } from "./check.js";

/** Batch, heads, kv heads, queries and head size, with `past` keys before the queries. */
interface Shape extends Omit<AttentionDims, "S" | "tokenMajor"> {
  past: number;
  /** Keys of the last row that are padding (at the end). */
  padded: number;
}

/** The attention decoderStep runs for q [B, H, T, hd] over k, v [B, KV, S, hd]: fused or the ops path. */
function attend(s: Shape, valid: boolean[][], mask: tf.Tensor, q: tf.Tensor, k: tf.Tensor, v: tf.Tensor): tf.Tensor {
  const scale = 1 / Math.sqrt(s.hd);
  if (fusedKernelsActive()) return attentionFused(q, k, v, mask, s.past, scale);
  return attendChunk(tf.reshape(q, [s.B, s.KV, (s.H / s.KV) * s.T, s.hd]), k, false, v, attentionBias(valid, s.past, s.T), scale);
}

async function check(s: Shape, reps: number): Promise<KernelCheck[]> {
  const { B, H, KV, T, past, hd } = s;
  const S = past + T;
  const valid = Array.from({ length: B }, (_, b) => Array.from({ length: S }, (_, j) => b < B - 1 || j < S - s.padded));
  const mask = tf.tensor2d(valid.map((r) => r.map((x) => (x ? 1 : 0))), [B, S]);
  const q = tf.randomNormal([B, H, T, hd], 0, 1, "float32", 1);
  const k = tf.randomNormal([B, KV, S, hd], 0, 1, "float32", 2);
  const v = tf.randomNormal([B, KV, S, hd], 0, 1, "float32", 3);
  const r = tf.randomNormal([B, H, T, hd], 0, 1, "float32", 4);
  const forward = () => [tf.tidy(() => attend(s, valid, mask, q, k, v))];
  const backward = () => tf.grads((a: tf.Tensor, b: tf.Tensor, c: tf.Tensor) => tf.sum(tf.mul(attend(s, valid, mask, a, b, c), r)))([q, k, v]);
  const values = bothPaths(forward);
  const grads = bothPaths(backward);
  const value_err = await relativeError(values.fused[0], values.ops[0]);
  let grad_err = 0;
  for (let i = 0; i < 3; i++) grad_err = Math.max(grad_err, await relativeError(grads.fused[i], grads.ops[i]));
  tf.dispose([...values.fused, ...values.ops, ...grads.fused, ...grads.ops]);
  const dispatches = async (fused: boolean, f: () => tf.Tensor[]) => {
    useFusedKernels(fused);
    try {
      const { result, dispatches } = await countDispatches(async () => f());
      tf.dispose(result);
      return dispatches;
    } finally {
      useFusedKernels(true);
    }
  };
  const shape = `B${B} H${H} KV${KV} T${T} past${past} hd${hd}${s.padded ? ` pad${s.padded}` : ""}`;
  const rows: KernelCheck[] = [];
  for (const [kernel, f, errs] of [["attention fwd", forward, [value_err, NaN]], ["attention fwd+bwd", backward, [value_err, grad_err]]] as const) {
    const fused_ms = await timePath(true, f, reps);
    const ops_ms = await timePath(false, f, reps);
    rows.push({ kernel, shape, value_err: errs[0], grad_err: errs[1], fused_ms, ops_ms, note: `dispatches ${await dispatches(true, f)} fused, ${await dispatches(false, f)} ops` });
  }
  tf.dispose([mask, q, k, v, r]);
  return rows;
}

export async function checks(big: boolean): Promise<KernelCheck[]> {
  ensureGradients();
  const shapes: Shape[] = big
    ? [
        { B: 4, H: 14, KV: 2, T: 256, past: 256, hd: 64, padded: 0 },
        { B: 4, H: 14, KV: 2, T: 512, past: 0, hd: 64, padded: 0 },
      ]
    : [
        { B: 2, H: 4, KV: 2, T: 70, past: 16, hd: 64, padded: 9 },
        { B: 2, H: 4, KV: 1, T: 33, past: 0, hd: 32, padded: 0 },
        { B: 2, H: 2, KV: 2, T: 1, past: 40, hd: 64, padded: 0 },
      ];
  const out: KernelCheck[] = [];
  for (const s of shapes) out.push(...(await check(s, big ? 10 : 2)));
  return out;
}
