/**
 * Log-probabilities of target tokens (and the entropies) over the vocabulary as two WGSL kernels for the
 * webgpu backend, with a registered gradient.
 *
 * The tfjs ops path (lib/train/logprobs.ts) runs about a dozen kernels over the B x T x V logits forward
 * (divide, logSumExp's max/sub/exp/sum/log/add, sub, exp, oneHot, mul, sum, and three more for the entropy)
 * and keeps the softmax [B, T, V] alive until the backward pass, which allocates four more. Here:
 *  - forward, one dispatch, one workgroup per (b, t) row: each thread streams its strided share of the row
 *    (coalesced) keeping an online max m, s = Σ exp(z - m) and h = Σ exp(z - m)(z - m), rescaled when m
 *    grows, so the row is read once; the workgroup then merges the 256 triples in workgroup memory. It
 *    writes stats [3, B, T]: logp = (z[target] - m) - log s, lse = m + log s, entropy = log s - h / s.
 *  - backward, one dispatch: dlogits[n, v] = dy[n] (onehot(target)[v] - exp(z[n, v] - lse[n])) / temperature,
 *    recomputing the softmax from the logits (which the tape holds anyway) and lse, so no [B, T, V] tensor
 *    is saved between the passes.
 * The op returns logp and entropy as slices of stats (two [B, T] copies); the gradient reads dy and lse
 * straight from the stats-shaped buffers. Entropy carries no gradient, as on the ops path.
 */
import { tf } from "../../tf.js";
import type { Program, Uniform, WebGpuBackendLike } from "./program.js";

export const TARGET_LOGPROBS = "T2sTargetLogprobs";
export const TARGET_LOGPROBS_GRAD = "T2sTargetLogprobsGrad";

const WORKGROUP = 256;
/** Backward: each workgroup writes this many consecutive entries of one row (4 per thread). */
const GRAD_CHUNK = WORKGROUP * 4;

/** Linear workgroup index: tfjs folds dispatches past 65,535 workgroups into 2D or 3D grids. */
const WORKGROUP_INDEX = "workgroupId.x + workgroupId.y * numWorkgroups.x + workgroupId.z * numWorkgroups.x * numWorkgroups.y";

interface LogprobAttrs {
  temperature: number;
  withEntropy: boolean;
}

/**
 * The forward program. Rows, vocabulary and temperature are uniforms (one pipeline serves every batch);
 * whether the entropy is summed is compiled in.
 */
function forwardProgram(b: number, t: number, withEntropy: boolean): Program {
  const h = (code: string) => (withEntropy ? code : "");
  return {
    variableNames: ["X", "Tgt"],
    outputShape: [3, b, t],
    shaderKey: `t2s_target_logprobs_${withEntropy ? "entropy" : "plain"}`,
    dispatchLayout: { x: [0] },
    dispatch: [b * t, 1, 1],
    workgroupSize: [WORKGROUP, 1, 1],
    uniforms: "rows : i32, vocab : i32, temperature : f32,",
    getUserCode: () => `
      // a finite stand-in for -inf: exp(LOWEST - z) is 0 without the inf - inf = NaN of a true -inf
      const LOWEST = -3.0e38;
      var<workgroup> redM : array<f32, ${WORKGROUP}>;
      var<workgroup> redS : array<f32, ${WORKGROUP}>;
      ${h(`var<workgroup> redH : array<f32, ${WORKGROUP}>;`)}
      fn main(index : i32) {
        let lane = i32(localId.x);
        let wg = i32(${WORKGROUP_INDEX});
        // no early return before the barriers: surplus workgroups of a folded grid redo the last row and
        // write nothing
        let row = min(wg, uniforms.rows - 1);
        let base = u32(row) * u32(uniforms.vocab);
        var m = LOWEST;
        var s = 0.0;
        var h = 0.0;
        for (var v = lane; v < uniforms.vocab; v = v + ${WORKGROUP}) {
          let z = X[base + u32(v)] / uniforms.temperature;
          if (z > m) {
            // rescale the sums to the new max: exp(u - d) = exp(u) e^-d, and h's terms lose d each
            let d = z - m;
            let e = exp(-d);
            ${h("h = e * (h - d * s);")}
            s = e * s + 1.0;
            m = z;
          } else {
            let u = z - m;
            let e = exp(u);
            s = s + e;
            ${h("h = h + select(e * u, 0.0, e == 0.0);")}
          }
        }
        redM[lane] = m;
        redS[lane] = s;
        ${h("redH[lane] = h;")}
        workgroupBarrier();
        for (var k = ${WORKGROUP / 2}; k > 0; k = k / 2) {
          if (lane < k) {
            let m1 = redM[lane];
            let m2 = redM[lane + k];
            let mm = max(m1, m2);
            let d1 = mm - m1;
            let d2 = mm - m2;
            let e1 = exp(-d1);
            let e2 = exp(-d2);
            ${h("redH[lane] = e1 * (redH[lane] - d1 * redS[lane]) + e2 * (redH[lane + k] - d2 * redS[lane + k]);")}
            redS[lane] = e1 * redS[lane] + e2 * redS[lane + k];
            redM[lane] = mm;
          }
          workgroupBarrier();
        }
        if (lane == 0 && wg < uniforms.rows) {
          let mx = redM[0];
          let logS = log(redS[0]);
          let t = Tgt[row];
          // a target outside the vocabulary scores 0, as the one-hot product of the ops path does
          var lp = 0.0;
          if (t >= 0 && t < uniforms.vocab) {
            lp = (X[base + u32(t)] / uniforms.temperature - mx) - logS;
          }
          result[row] = lp;
          result[uniforms.rows + row] = mx + logS;
          result[2 * uniforms.rows + row] = ${withEntropy ? "logS - redH[0] / redS[0]" : "0.0"};
        }
      }`,
  };
}

/** The backward program: workgroup w writes GRAD_CHUNK entries of row w / chunks. */
function backwardProgram(shape: number[]): Program {
  const [b, t, vocab] = shape;
  const chunks = Math.ceil(vocab / GRAD_CHUNK);
  return {
    variableNames: ["X", "Tgt", "Stats", "Dy"],
    outputShape: shape,
    shaderKey: "t2s_target_logprobs_grad",
    dispatchLayout: { x: [0] },
    dispatch: [b * t * chunks, 1, 1],
    workgroupSize: [WORKGROUP, 1, 1],
    uniforms: "rows : i32, vocab : i32, chunks : i32, temperature : f32,",
    getUserCode: () => `
      fn main(index : i32) {
        let wg = i32(${WORKGROUP_INDEX});
        let row = wg / uniforms.chunks;
        if (row >= uniforms.rows) {
          return;
        }
        let first = (wg - row * uniforms.chunks) * ${GRAD_CHUNK} + i32(localId.x);
        let base = u32(row) * u32(uniforms.vocab);
        let g = Dy[row] / uniforms.temperature;
        let lse = Stats[uniforms.rows + row];
        let t = Tgt[row];
        for (var k = 0; k < 4; k = k + 1) {
          let v = first + k * ${WORKGROUP};
          if (v < uniforms.vocab) {
            let p = exp(X[base + u32(v)] / uniforms.temperature - lse);
            result[base + u32(v)] = g * (select(0.0, 1.0, v == t) - p);
          }
        }
      }`,
  };
}

function checkShapes(logits: tf.TensorInfo, targets: tf.TensorInfo): void {
  const [b, t] = logits.shape;
  if (logits.shape.length !== 3 || targets.shape.length !== 2 || targets.shape[0] !== b || targets.shape[1] !== t) {
    throw new Error(`targetLogprobs needs logits [B, T, V] and targets [B, T], got ${JSON.stringify(logits.shape)} and ${JSON.stringify(targets.shape)}`);
  }
  if (logits.dtype !== "float32" || targets.dtype !== "int32") throw new Error(`targetLogprobs needs float32 logits and int32 targets, got ${logits.dtype} and ${targets.dtype}`);
}

let registered = false;

/** Registers both kernels for the webgpu backend and the forward kernel's gradient (once). */
export function registerLogprobKernels(): void {
  if (registered) return;
  registered = true;
  tf.registerKernel({
    kernelName: TARGET_LOGPROBS,
    backendName: "webgpu",
    kernelFunc: ({ inputs, backend, attrs }) => {
      const { logits, targets } = inputs as { logits: tf.TensorInfo; targets: tf.TensorInfo };
      const { temperature, withEntropy } = attrs as unknown as LogprobAttrs;
      checkShapes(logits, targets);
      const [b, t, vocab] = logits.shape;
      const rows = b * t;
      const gpu = backend as unknown as WebGpuBackendLike;
      const uniforms: Uniform[] = [{ type: "int32", data: [rows] }, { type: "int32", data: [vocab] }, { type: "float32", data: [temperature] }];
      return gpu.runWebGPUProgram(forwardProgram(b, t, withEntropy), [logits, targets], "float32", uniforms);
    },
  });
  tf.registerKernel({
    kernelName: TARGET_LOGPROBS_GRAD,
    backendName: "webgpu",
    kernelFunc: ({ inputs, backend, attrs }) => {
      const { logits, targets, stats, dy } = inputs as Record<"logits" | "targets" | "stats" | "dy", tf.TensorInfo>;
      const { temperature } = attrs as unknown as LogprobAttrs;
      const [b, t, vocab] = logits.shape;
      const rows = b * t;
      const gpu = backend as unknown as WebGpuBackendLike;
      const uniforms: Uniform[] = [rows, vocab, Math.ceil(vocab / GRAD_CHUNK)].map((x): Uniform => ({ type: "int32", data: [x] }));
      uniforms.push({ type: "float32", data: [temperature] });
      return gpu.runWebGPUProgram(backwardProgram(logits.shape), [logits, targets, stats, dy], "float32", uniforms);
    },
  });
  tf.registerGradient({
    kernelName: TARGET_LOGPROBS,
    inputsToSave: ["logits", "targets"],
    outputsToSave: [true],
    gradFunc: (dy, saved, attrs) => {
      const [logits, targets, stats] = saved;
      return {
        logits: () => tf.engine().runKernel(TARGET_LOGPROBS_GRAD, { logits, targets, stats, dy: dy as tf.Tensor }, { temperature: (attrs as unknown as LogprobAttrs).temperature }) as tf.Tensor,
        targets: () => tf.zerosLike(targets),
      };
    },
  });
}

/**
 * log p(targets) [B, T] under softmax(logits / temperature) and, when asked, the entropies [B, T], on the
 * webgpu backend in one dispatch over the logits (plus two small copies); differentiable w.r.t. logits.
 */
export function fusedTargetLogprobs(logits: tf.Tensor3D, targets: tf.Tensor2D, temperature: number, withEntropy: boolean): { logp: tf.Tensor2D; entropy?: tf.Tensor2D } {
  const [b, t] = logits.shape;
  const stats = tf.engine().runKernel(TARGET_LOGPROBS, { logits, targets }, { temperature, withEntropy }) as tf.Tensor3D;
  const row = (i: number) => tf.reshape(tf.slice(stats, [i, 0, 0], [1, b, t]), [b, t]) as tf.Tensor2D;
  const logp = row(0);
  // kept, as the ops path keeps it: callers read it outside the tidy that made the log-probs
  const entropy = withEntropy ? tf.keep(row(2)) : undefined;
  stats.dispose();
  return { logp, entropy };
}
