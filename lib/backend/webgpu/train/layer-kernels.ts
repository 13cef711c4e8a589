/**
 * Fused RMSNorm for the WebGPU backend, forward and backward, as tfjs kernels with a registered gradient.
 *
 * Written with tfjs ops, y = x · rsqrt(mean(x²) + eps) · w is six kernels forward and about a dozen backward
 * for every norm of every layer (two per layer, plus the per-head q/k norms of Qwen3 and the final norm).
 * Here the forward is one dispatch (a workgroup per row, the row's sum of squares reduced in workgroup
 * memory), dx one more, and dw (trainable in full-weight training) two: partial sums over chunks of rows,
 * then one sum over the chunks. The backward recomputes each row's rsqrt from x instead of saving it: the
 * forward stays one dispatch with one output, and the tape keeps only x and w alive.
 *
 * lib/model/decoder.ts calls `rmsNormFused` when fusedKernelsActive() (lib/backend/webgpu/train/fused.ts); the
 * rotary and SwiGLU kernels are in rope-swiglu.ts.
 */
import { tf } from "../../tf.js";
import type { Program, Uniform, WebGpuBackendLike } from "./program.js";
import { viewAs } from "./program.js";

export const RMS_NORM = "T2sRmsNorm";
export const RMS_NORM_GRAD_X = "T2sRmsNormGradX";
export const RMS_NORM_GRAD_W = "T2sRmsNormGradW";

/** Threads per row: a power of two (the reduction halves it), no more than the row needs, at least 32. */
export function rowWorkgroup(D: number): number {
  let wg = 32;
  while (wg < D && wg < 256) wg *= 2;
  return wg;
}

/** Rows per dw partial: about 512 chunks (enough workgroups to fill a large GPU, few partials to sum). */
export function rowsPerChunk(rows: number): number {
  return Math.max(1, Math.ceil(rows / 512));
}

/**
 * The workgroup's flat id. tfjs-backend-webgpu folds a dispatch over 65,535 workgroups into two or three
 * dimensions (rounding up), so kernels that use a workgroup per row fold it back and skip ids past the end.
 */
const WORKGROUP_FLAT = "i32(workgroupId.x + workgroupId.y * numWorkgroups.x + workgroupId.z * numWorkgroups.x * numWorkgroups.y)";

/**
 * Sum over the workgroup of `value` (every lane gets it). Barriers stay in uniform control flow: callers
 * never return early, rows past the end only mask their loads and stores.
 */
function workgroupSum(wg: number, buffer: string): string {
  return `
  fn ${buffer}Sum(lane : i32, value : f32) -> f32 {
    ${buffer}[lane] = value;
    workgroupBarrier();
    for (var s = ${wg / 2}; s > 0; s = s / 2) {
      if (lane < s) {
        ${buffer}[lane] = ${buffer}[lane] + ${buffer}[lane + s];
      }
      workgroupBarrier();
    }
    let total = ${buffer}[0];
    // every lane has read the total before the buffer is written again
    workgroupBarrier();
    return total;
  }`;
}

/**
 * A program with a workgroup per row of x [rows, D]: `body` runs with `row`, `lane`, `D`, `n` (D, or 0 for
 * a workgroup past the last row), `base` (the row's first element) and `redSum` (a workgroup sum) in scope.
 */
function rowProgram(rows: number, D: number, key: string, variableNames: string[], body: (wg: number) => string): Program {
  const wg = rowWorkgroup(D);
  return {
    variableNames,
    outputShape: [rows, D],
    shaderKey: `${key}_${wg}`,
    dispatchLayout: { x: [0, 1] },
    dispatch: [rows, 1, 1],
    workgroupSize: [wg, 1, 1],
    uniforms: "rows : i32, D : i32, eps : f32,",
    getUserCode: () => `
      var<workgroup> red : array<f32, ${wg}>;
      ${workgroupSum(wg, "red")}
      fn main(index : i32) {
        let row = ${WORKGROUP_FLAT};
        let lane = i32(localId.x);
        let D = uniforms.D;
        let n = select(0, D, row < uniforms.rows);
        let base = row * D;
        ${body(wg)}
      }`,
  };
}

/** y[r, :] = x[r, :] · rsqrt(sum(x[r, :]²) / D + eps) · w. */
function forwardProgram(rows: number, D: number): Program {
  return rowProgram(rows, D, "t2s_rmsnorm_fwd", ["X", "W"], (wg) => `
        var acc = 0.0;
        for (var d = lane; d < n; d = d + ${wg}) {
          let v = X[base + d];
          acc = acc + v * v;
        }
        let inv = inverseSqrt(redSum(lane, acc) / f32(D) + uniforms.eps);
        for (var d = lane; d < n; d = d + ${wg}) {
          result[base + d] = X[base + d] * inv * W[d];
        }`);
}

/**
 * dx[r, :] = inv · g - x · inv³ · sum(g · x) / D with g = dy · w and inv = rsqrt(mean(x²) + eps), the
 * derivative of y = x · inv · w through both x and inv.
 */
function gradXProgram(rows: number, D: number): Program {
  return rowProgram(rows, D, "t2s_rmsnorm_dx", ["X", "W", "DY"], (wg) => `
        var squares = 0.0;
        var dot = 0.0;
        for (var d = lane; d < n; d = d + ${wg}) {
          let v = X[base + d];
          squares = squares + v * v;
          dot = dot + DY[base + d] * W[d] * v;
        }
        let inv = inverseSqrt(redSum(lane, squares) / f32(D) + uniforms.eps);
        let c = inv * inv * inv * redSum(lane, dot) / f32(D);
        for (var d = lane; d < n; d = d + ${wg}) {
          result[base + d] = inv * DY[base + d] * W[d] - X[base + d] * c;
        }`);
}

/**
 * partial[c, :] = sum over the rows of chunk c of dy · x · inv: one workgroup per chunk of `chunk` rows, each
 * lane holding the running sums of the columns lane, lane + wg, ... (D is compiled in for their count).
 */
function gradWPartialProgram(rows: number, D: number, chunk: number): Program {
  const wg = rowWorkgroup(D);
  const cols = Math.ceil(D / wg);
  const chunks = Math.ceil(rows / chunk);
  return {
    variableNames: ["X", "DY"],
    outputShape: [chunks, D],
    shaderKey: `t2s_rmsnorm_dw_partial_${wg}_${D}`,
    dispatchLayout: { x: [0, 1] },
    dispatch: [chunks, 1, 1],
    workgroupSize: [wg, 1, 1],
    uniforms: "rows : i32, chunk : i32, chunks : i32, eps : f32,",
    getUserCode: () => `
      var<workgroup> red : array<f32, ${wg}>;
      ${workgroupSum(wg, "red")}
      fn main(index : i32) {
        let group = ${WORKGROUP_FLAT};
        let lane = i32(localId.x);
        var acc : array<f32, ${cols}>;
        for (var k = 0; k < ${cols}; k = k + 1) {
          acc[k] = 0.0;
        }
        // a uniform trip count (the barriers inside need one); rows past the end read as zero
        for (var i = 0; i < uniforms.chunk; i = i + 1) {
          let row = group * uniforms.chunk + i;
          let n = select(0, ${D}, row < uniforms.rows && group < uniforms.chunks);
          let base = row * ${D};
          var squares = 0.0;
          for (var d = lane; d < n; d = d + ${wg}) {
            let v = X[base + d];
            squares = squares + v * v;
          }
          let inv = inverseSqrt(redSum(lane, squares) / ${D}.0 + uniforms.eps);
          for (var k = 0; k < ${cols}; k = k + 1) {
            let d = lane + k * ${wg};
            if (d < n) {
              acc[k] = acc[k] + DY[base + d] * X[base + d] * inv;
            }
          }
        }
        if (group < uniforms.chunks) {
          for (var k = 0; k < ${cols}; k = k + 1) {
            let d = lane + k * ${wg};
            if (d < ${D}) {
              result[group * ${D} + d] = acc[k];
            }
          }
        }
      }`,
  };
}

const SUM_WORKGROUP = 64;

/** dw[d] = sum over chunks of partial[c, d]: one thread per column (neighbours read neighbouring floats). */
function sumChunksProgram(chunks: number, D: number): Program {
  return {
    variableNames: ["P"],
    outputShape: [D],
    shaderKey: "t2s_rmsnorm_dw_sum",
    dispatchLayout: { x: [0] },
    dispatch: [Math.ceil(D / SUM_WORKGROUP), 1, 1],
    workgroupSize: [SUM_WORKGROUP, 1, 1],
    size: true,
    uniforms: "chunks : i32,",
    getUserCode: () => `
      fn main(index : i32) {
        if (index < uniforms.size) {
          var acc = 0.0;
          for (var c = 0; c < uniforms.chunks; c = c + 1) {
            acc = acc + P[c * uniforms.size + index];
          }
          result[index] = acc;
        }
      }`,
  };
}

const i32 = (x: number): Uniform => ({ type: "int32", data: [x] });
const f32 = (x: number): Uniform => ({ type: "float32", data: [x] });

/** Rows and row length of x seen as a matrix over its last axis. */
function rowsOf(x: tf.TensorInfo): [number, number] {
  const D = x.shape[x.shape.length - 1];
  return [D === 0 ? 0 : tf.util.sizeFromShape(x.shape) / D, D];
}

function checkInputs(x: tf.TensorInfo, w: tf.TensorInfo): void {
  const D = x.shape[x.shape.length - 1];
  if (x.shape.length < 1 || w.shape.length !== 1 || w.shape[0] !== D) throw new Error(`rmsNormFused: weight [${w.shape}] does not match the last axis of x [${x.shape}]`);
  if (x.dtype !== "float32" || w.dtype !== "float32") throw new Error("rmsNormFused: float32 only");
}

let registered = false;

/** Registers the RMSNorm kernels for webgpu and their gradient (once). */
export function registerRmsNormKernels(): void {
  if (registered) return;
  registered = true;
  tf.registerKernel({
    kernelName: RMS_NORM,
    backendName: "webgpu",
    kernelFunc: ({ inputs, backend, attrs }) => {
      const { x, w } = inputs as { x: tf.TensorInfo; w: tf.TensorInfo };
      checkInputs(x, w);
      const [rows, D] = rowsOf(x);
      const gpu = backend as unknown as WebGpuBackendLike;
      const eps = (attrs as { eps: number }).eps;
      const y = gpu.runWebGPUProgram(forwardProgram(rows, D), [viewAs(x, [rows, D]), w], "float32", [i32(rows), i32(D), f32(eps)]);
      return viewAs(y, x.shape);
    },
  });
  tf.registerKernel({
    kernelName: RMS_NORM_GRAD_X,
    backendName: "webgpu",
    kernelFunc: ({ inputs, backend, attrs }) => {
      const { x, w, dy } = inputs as { x: tf.TensorInfo; w: tf.TensorInfo; dy: tf.TensorInfo };
      const [rows, D] = rowsOf(x);
      const gpu = backend as unknown as WebGpuBackendLike;
      const eps = (attrs as { eps: number }).eps;
      const dx = gpu.runWebGPUProgram(gradXProgram(rows, D), [viewAs(x, [rows, D]), w, viewAs(dy, [rows, D])], "float32", [i32(rows), i32(D), f32(eps)]);
      return viewAs(dx, x.shape);
    },
  });
  tf.registerKernel({
    kernelName: RMS_NORM_GRAD_W,
    backendName: "webgpu",
    kernelFunc: ({ inputs, backend, attrs }) => {
      const { x, dy } = inputs as { x: tf.TensorInfo; dy: tf.TensorInfo };
      const [rows, D] = rowsOf(x);
      const gpu = backend as unknown as WebGpuBackendLike;
      const eps = (attrs as { eps: number }).eps;
      const chunk = rowsPerChunk(rows);
      const chunks = Math.ceil(rows / chunk);
      const partial = gpu.runWebGPUProgram(gradWPartialProgram(rows, D, chunk), [viewAs(x, [rows, D]), viewAs(dy, [rows, D])], "float32", [i32(rows), i32(chunk), i32(chunks), f32(eps)]);
      const dw = gpu.runWebGPUProgram(sumChunksProgram(chunks, D), [partial], "float32", [i32(chunks)]);
      gpu.disposeData(partial.dataId);
      return dw;
    },
  });
  tf.registerGradient({
    kernelName: RMS_NORM,
    inputsToSave: ["x", "w"],
    gradFunc: (dy, saved, attrs) => {
      const [x, w] = saved;
      const eps = (attrs as { eps: number }).eps;
      const d = dy as tf.Tensor;
      return {
        x: () => tf.engine().runKernel(RMS_NORM_GRAD_X, { x, w, dy: d }, { eps }) as tf.Tensor,
        w: () => tf.engine().runKernel(RMS_NORM_GRAD_W, { x, dy: d }, { eps }) as tf.Tensor,
      };
    },
  });
}

/** RMSNorm of x over its last axis with weight w [D] on WebGPU: one dispatch forward, three backward (dw only when w is trained). */
export function rmsNormFused(x: tf.Tensor, w: tf.Tensor1D, eps: number): tf.Tensor {
  return tf.engine().runKernel(RMS_NORM, { x, w }, { eps }) as tf.Tensor;
}
