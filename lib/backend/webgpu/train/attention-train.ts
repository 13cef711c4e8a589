/**
 * Fused causal grouped-query attention for training on WebGPU, forward and backward, as tfjs kernels.
 *
 * The ops path (lib/model/attention.ts) multiplies queries by keys, adds a [B, 1, T, S] bias built on the
 * CPU, takes a softmax and multiplies by the values: every [B, H, T, S] score and probability tensor goes
 * through global memory, and the backward keeps them. Here attention is computed flash-style: each
 * workgroup holds a tile of keys and values in workgroup memory and runs an online softmax over them for
 * 64 query rows at once, so nothing of size T x S is ever stored. The forward saves only the context and
 * the row log-sum-exp; the backward recomputes the probabilities from q, k and it.
 *
 * Masking: key s is visible to query t of row b iff keyValid[b][s] and s <= past + t (`past` keys, e.g. a
 * broadcast prompt prefix, sit before the rows' own tokens). A query row that sees no key gets context 0.
 * Query head h reads kv head floor(h / G), G = H / KV; keys and values are never repeated in memory.
 *
 * Dispatches per call: forward 2 (attention into one packed buffer [context | lse], then the context copied
 * out: a tfjs program writes one buffer), backward 5 (D = rowsum(dO * O) with lse; dq; dk and dv per query
 * head into one packed buffer; the sum over the G heads of a kv head, once for dk and once for dv).
 */
import { tf } from "../../tf.js";
import type { WebGpuBackendLike, Uniform } from "./program.js";
import { contextProgram, dkvProgram, dqProgram, forwardProgram, rowStatsProgram, shapeUniforms, sumHeadsProgram, type AttentionDims } from "./attention-train-wgsl.js";

export const ATTENTION = "T2sAttention";
export const ATTENTION_GRAD = "T2sAttentionGrad";

type Attrs = { past: number; scale: number; tokenMajor: boolean };

/** Whether the kernels run this head size (read as vec4 rows, compiled in; every model here has 64). */
export function attentionFusedSupports(hd: number): boolean {
  return hd % 4 === 0 && hd >= 4 && hd <= 128;
}

function dimsOf(q: tf.TensorInfo, k: tf.TensorInfo, tokenMajor: boolean): AttentionDims {
  const [B, a, c, hd] = q.shape;
  const [, KV, S] = k.shape;
  return { B, H: tokenMajor ? c : a, KV, T: tokenMajor ? a : c, S, hd, tokenMajor };
}

function checkShapes(q: tf.TensorInfo, k: tf.TensorInfo, v: tf.TensorInfo, mask: tf.TensorInfo, a: Attrs): AttentionDims {
  const d = dimsOf(q, k, a.tokenMajor);
  const { B, H, KV, T, S, hd } = d;
  const ok =
    q.shape.length === 4 && k.shape.length === 4 && v.shape.join() === k.shape.join() && k.shape[0] === B && k.shape[3] === hd && H % KV === 0 &&
    mask.shape.join() === [B, S].join() && attentionFusedSupports(hd) && a.past >= 0 && a.past + T <= S;
  if (!ok) {
    const qLayout = a.tokenMajor ? "[B,T,H,hd]" : "[B,H,T,hd]";
    throw new RangeError(`fused attention: bad shapes q ${q.shape} k ${k.shape} v ${v.shape} keyValid ${mask.shape} past ${a.past} (need q ${qLayout}, k and v [B,KV,S,hd], keyValid [B,S], H % KV = 0, hd a multiple of 4 up to 128, past + T <= S)`);
  }
  return d;
}

let registered = false;

/** Registers the forward and backward kernels and the gradient (once). */
export function registerAttentionKernels(): void {
  if (registered) return;
  registered = true;
  tf.registerKernel({
    kernelName: ATTENTION,
    backendName: "webgpu",
    kernelFunc: ({ inputs, backend, attrs }) => {
      const gpu = backend as unknown as WebGpuBackendLike;
      const { q, k, v, keyValid } = inputs as Record<string, tf.TensorInfo>;
      const a = attrs as unknown as Attrs;
      const d = checkShapes(q, k, v, keyValid, a);
      const packed = gpu.runWebGPUProgram(forwardProgram(d), [q, k, v, keyValid], "float32", shapeUniforms(d, a.past, a.scale));
      const ctx = gpu.runWebGPUProgram(contextProgram(q.shape), [packed], "float32");
      return [ctx, packed];
    },
  });
  tf.registerKernel({
    kernelName: ATTENTION_GRAD,
    backendName: "webgpu",
    kernelFunc: ({ inputs, backend, attrs }) => {
      const gpu = backend as unknown as WebGpuBackendLike;
      const { q, k, v, keyValid, packed, dy } = inputs as Record<string, tf.TensorInfo>;
      const a = attrs as unknown as Attrs;
      const d = dimsOf(q, k, a.tokenMajor);
      const N = d.B * d.H * d.T;
      const uniforms = shapeUniforms(d, a.past, a.scale);
      const stats = gpu.runWebGPUProgram(rowStatsProgram(d), [packed, dy], "float32", [{ type: "int32", data: [N] }]);
      const dq = gpu.runWebGPUProgram(dqProgram(d), [q, k, v, keyValid, dy, stats], "float32", uniforms);
      const perHead = gpu.runWebGPUProgram(dkvProgram(d), [q, k, v, keyValid, dy, stats], "float32", uniforms);
      const half = d.B * d.H * d.S * d.hd;
      const per: Uniform = { type: "int32", data: [d.S * d.hd] };
      const dk = gpu.runWebGPUProgram(sumHeadsProgram(d), [perHead], "float32", [{ type: "int32", data: [0] }, per]);
      const dv = gpu.runWebGPUProgram(sumHeadsProgram(d), [perHead], "float32", [{ type: "int32", data: [half] }, per]);
      gpu.disposeData(stats.dataId);
      gpu.disposeData(perHead.dataId);
      return [dq, dk, dv];
    },
  });
  tf.registerGradient({
    kernelName: ATTENTION,
    inputsToSave: ["q", "k", "v", "keyValid"],
    outputsToSave: [false, true],
    gradFunc: (dys: tf.Tensor | tf.Tensor[], saved: tf.Tensor[], attrs: unknown) => {
      const dy = (Array.isArray(dys) ? dys[0] : dys) as tf.Tensor;
      const [q, k, v, keyValid, packed] = saved;
      const [dq, dk, dv] = tf.engine().runKernel(ATTENTION_GRAD, { q, k, v, keyValid, packed, dy }, attrs as tf.NamedAttrMap) as tf.Tensor[];
      return { q: () => dq, k: () => dk, v: () => dv, keyValid: () => tf.cast(tf.zerosLike(keyValid), "float32") };
    },
  });
}

/**
 * Causal grouped-query attention on the webgpu backend: q [B, H, T, hd] (queries at positions past..past+T-1),
 * k and v [B, KV, S, hd] (S >= past + T), keyValid [B, S] (1 where the key is a real token; float32 or
 * int32). Returns the context [B, H, T, hd]; differentiable in q, k and v. `scale` multiplies q·k (usually
 * 1 / sqrt(hd)). With `tokenMajor`, q and the context are [B, T, H, hd] (what the projections give and take,
 * so the decoder transposes neither).
 */
export function attentionFused(q: tf.Tensor, k: tf.Tensor, v: tf.Tensor, keyValid: tf.Tensor, past: number, scale: number, opts: { tokenMajor?: boolean } = {}): tf.Tensor4D {
  const attrs: Attrs = { past, scale, tokenMajor: opts.tokenMajor ?? false };
  const [ctx, packed] = tf.engine().runKernel(ATTENTION, { q, k, v, keyValid }, attrs as unknown as tf.NamedAttrMap) as tf.Tensor[];
  // the packed buffer lives on only as the gradient's saved copy (when a tape records)
  packed.dispose();
  return ctx as tf.Tensor4D;
}
