/**
 * The slice of tfjs-backend-webgpu's program interface that the kit's own WGSL kernels use, written out
 * here because the package's own types need @webgpu/types. A program is WGSL for `main(index)` plus the
 * dispatch shape; `runWebGPUProgram` binds the inputs (`variableNames`, read as flat arrays named after
 * them), the output (`result`) and the uniforms, and records one dispatch.
 */
import { tf } from "../../tf.js";

export interface Program {
  variableNames: string[];
  outputShape: number[];
  /** Programs with the same key share one compiled pipeline: it must name everything compiled in. */
  shaderKey: string;
  dispatchLayout: { x: number[] };
  dispatch: [number, number, number];
  workgroupSize: [number, number, number];
  /** Adds `uniforms.size` (the output's element count). */
  size?: boolean;
  /** WGSL struct fields ("a : f32, b : i32,") filled from the uniform list passed with the run. */
  uniforms?: string;
  getUserCode(): string;
}

export type Uniform = { type: "float32" | "int32" | "uint32"; data: number[] };

export interface WebGpuBackendLike {
  runWebGPUProgram(program: Program, inputs: tf.TensorInfo[], dtype: "float32" | "int32", uniforms?: Uniform[], output?: tf.TensorInfo): tf.TensorInfo;
  makeTensorInfo(shape: number[], dtype: "float32" | "int32"): tf.TensorInfo;
  disposeData(dataId: object): void;
  refCount(dataId: object): number;
  tensorMap: { get(dataId: object): { values: unknown } | undefined };
}

/** The active backend as the WebGPU backend (call only when tf.getBackend() is "webgpu"). */
export function webgpuBackend(): WebGpuBackendLike {
  return tf.backend() as unknown as WebGpuBackendLike;
}

/** The same buffer seen with another shape (as tfjs's own Reshape does: no copy). */
export function viewAs(x: tf.TensorInfo, shape: number[]): tf.TensorInfo {
  return { dataId: x.dataId, shape, dtype: x.dtype };
}

export const ELEMENTWISE_WORKGROUP = 256;

/** One thread per element over flat buffers (inputs have the output's size; their shapes do not matter). */
export function elementwise(shape: number[], key: string, variableNames: string[], uniforms: string, body: string): Program {
  return {
    variableNames,
    outputShape: shape,
    shaderKey: key,
    dispatchLayout: { x: shape.map((_, i) => i) },
    dispatch: [Math.ceil(tf.util.sizeFromShape(shape) / ELEMENTWISE_WORKGROUP), 1, 1],
    workgroupSize: [ELEMENTWISE_WORKGROUP, 1, 1],
    size: true,
    uniforms,
    getUserCode: () => `
      fn main(index : i32) {
        if (index < uniforms.size) {
          ${body}
        }
      }`,
  };
}
