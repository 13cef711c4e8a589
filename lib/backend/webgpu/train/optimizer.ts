/**
 * Fused optimizer kernels for the WebGPU backend.
 *
 * On the GPU host a training step is bound by kernel launches, not arithmetic: tfjs-backend-webgpu records
 * and submits every op from JavaScript, and AdamW written with tfjs ops is about 18 elementwise launches
 * per weight tensor, the gradient-norm clip three more (square, sum, add). Here the same arithmetic runs as
 * three launches per tensor for AdamW and one per tensor for the squared norm.
 *
 * AdamW overwrites m, v and the weights in place. New tensors every step would hand the buffer pool three
 * model-sized buffers to recycle per step (6 GB for a 0.5B model), more than its budget
 * (lib/backend/gpu-pool.ts), so each step would create them afresh. The tfjs Sum kernel reduces a whole
 * tensor in a single workgroup, which is slow for the 136M-entry embedding gradient; the sum-of-squares
 * kernel spreads each tensor over up to 1,024 workgroups.
 *
 * lib/train/optimizer.ts uses these when the webgpu backend is active and tfjs ops everywhere else.
 * `npm run bench:optimizer` compares both paths on a GPU.
 */
import { tf } from "../../tf.js";
import { ELEMENTWISE_WORKGROUP, elementwise, type Program, type Uniform, type WebGpuBackendLike } from "./program.js";

export const SUM_OF_SQUARES = "T2sSumOfSquares";

const WORKGROUP = ELEMENTWISE_WORKGROUP;

/** In place: result holds a moment s and becomes beta s + (1 - beta) (scale g), with (scale g)^2 for v. */
function momentInPlaceProgram(shape: number[], square: boolean): Program {
  return elementwise(shape, `t2s_adamw_moment_inplace_${square ? "v" : "m"}`, ["G"], "beta : f32, gradScale : f32,", `
          let g = uniforms.gradScale * G[index];
          result[index] = uniforms.beta * result[index] + (1.0 - uniforms.beta) * ${square ? "g * g" : "g"};`);
}

/** In place: p becomes p (1 - lr wd) - (lr / c1) m / (sqrt(v / c2) + eps), PyTorch's AdamW with the new moments. */
function paramInPlaceProgram(shape: number[]): Program {
  return elementwise(shape, "t2s_adamw_param_inplace", ["M", "V"], "decay : f32, stepSize : f32, c2 : f32, eps : f32,", `
          let denom = sqrt(V[index] / uniforms.c2) + uniforms.eps;
          result[index] = result[index] * uniforms.decay - uniforms.stepSize * (M[index] / denom);`);
}

/**
 * Squares and sums one tensor into `groups` partial sums written at `offset` of a shared output, so the
 * partial sums of every gradient land in one buffer and a single reduction finishes the norm.
 */
function sumOfSquaresProgram(totalPartials: number, groups: number): Program {
  return {
    variableNames: ["X"],
    outputShape: [totalPartials],
    shaderKey: "t2s_sum_of_squares",
    dispatchLayout: { x: [0] },
    dispatch: [groups, 1, 1],
    workgroupSize: [WORKGROUP, 1, 1],
    uniforms: "n : i32, offset : i32,",
    getUserCode: () => `
      var<workgroup> partial : array<f32, ${WORKGROUP}>;
      fn main(index : i32) {
        let lane = i32(localId.x);
        let group = i32(workgroupId.x);
        let stride = i32(numWorkgroups.x) * ${WORKGROUP};
        var acc = 0.0;
        for (var i = group * ${WORKGROUP} + lane; i < uniforms.n; i = i + stride) {
          let x = X[i];
          acc = acc + x * x;
        }
        partial[lane] = acc;
        workgroupBarrier();
        for (var s = ${WORKGROUP / 2}; s > 0; s = s / 2) {
          if (lane < s) {
            partial[lane] = partial[lane] + partial[lane + s];
          }
          workgroupBarrier();
        }
        if (lane == 0) {
          result[uniforms.offset + group] = partial[0];
        }
      }`,
  };
}

/** Workgroups for a tensor of n entries: about 4 elements per thread, at most 1,024 groups. */
export function sumOfSquaresGroups(n: number): number {
  return Math.max(1, Math.min(1024, Math.ceil(n / (WORKGROUP * 4))));
}

let registered = false;

/** Registers the sum-of-squares kernel for the webgpu backend (once; harmless when that backend is never used). */
export function registerWebgpuOptimizerKernels(): void {
  if (registered) return;
  registered = true;
  tf.registerKernel({
    kernelName: SUM_OF_SQUARES,
    backendName: "webgpu",
    kernelFunc: ({ inputs, backend }) => {
      const gpu = backend as unknown as WebGpuBackendLike;
      const xs = Object.values(inputs) as tf.TensorInfo[];
      const groups = xs.map((x) => sumOfSquaresGroups(tf.util.sizeFromShape(x.shape)));
      const total = groups.reduce((a, b) => a + b, 0);
      const out = gpu.makeTensorInfo([total], "float32");
      let offset = 0;
      xs.forEach((x, i) => {
        const n = tf.util.sizeFromShape(x.shape);
        // read as a flat vector (a reshape shares the buffer, as tfjs's own Reshape does)
        const flat: tf.TensorInfo = { dataId: x.dataId, shape: [n], dtype: x.dtype };
        const uniforms: Uniform[] = [{ type: "int32", data: [n] }, { type: "int32", data: [offset] }];
        gpu.runWebGPUProgram(sumOfSquaresProgram(total, groups[i]), [flat], "float32", uniforms, out);
        offset += groups[i];
      });
      return out;
    },
  });
}

// T2S_FUSED_OPTIMIZER=0 falls back to tfjs ops on WebGPU too (to rule the kernels out when chasing a bug)
let enabled = process.env.T2S_FUSED_OPTIMIZER !== "0";

/** Turns the fused path on or off (bench/optimizer.ts runs both). */
export function useFusedOptimizer(on: boolean): void {
  enabled = on;
}

/** True when the fused kernels run: the active backend is webgpu and they are not turned off. */
export function fusedOptimizerActive(): boolean {
  return enabled && tf.getBackend() === "webgpu";
}

export interface AdamWScalars {
  beta1: number;
  beta2: number;
  gradScale: number;
  decay: number;
  stepSize: number;
  c2: number;
  eps: number;
}

/** Whether nothing but `t` uses its GPU buffer, so writing it in place changes no other tensor. */
export function ownsBuffer(t: tf.Tensor): boolean {
  return (tf.backend() as unknown as WebGpuBackendLike).refCount(t.dataId) === 1;
}

/**
 * One AdamW update of p with its moments m and v, all three overwritten in place (three launches). Each
 * must own its buffer (ownsBuffer): the caller replaces a shared one by a copy first.
 */
export function fusedAdamWInPlace(p: tf.Tensor, m: tf.Tensor, v: tf.Tensor, g: tf.Tensor, a: AdamWScalars): void {
  const gpu = tf.backend() as unknown as WebGpuBackendLike;
  const f32 = (x: number): Uniform => ({ type: "float32", data: [x] });
  gpu.runWebGPUProgram(momentInPlaceProgram(m.shape, false), [g], "float32", [f32(a.beta1), f32(a.gradScale)], m);
  gpu.runWebGPUProgram(momentInPlaceProgram(v.shape, true), [g], "float32", [f32(a.beta2), f32(a.gradScale)], v);
  gpu.runWebGPUProgram(paramInPlaceProgram(p.shape), [m, v], "float32", [a.decay, a.stepSize, a.c2, a.eps].map(f32), p);
  // a copy read back earlier (a checkpoint) would now be stale
  for (const t of [p, m, v]) {
    const data = gpu.tensorMap.get(t.dataId);
    if (data) data.values = null;
  }
}

/** Partial sums of squares of all the tensors (one launch each); their sum is the squared global norm. */
export function fusedSumOfSquares(xs: tf.Tensor[]): tf.Tensor {
  const inputs: Record<string, tf.Tensor> = {};
  xs.forEach((x, i) => (inputs[`x${i}`] = x));
  return tf.engine().runKernel(SUM_OF_SQUARES, inputs) as tf.Tensor;
}
