/**
 * The kit's fp32 matrix multiply for tfjs's BatchMatMul kernel on WebGPU: C[b] = op(A[b]) · op(B[b]) for the
 * forward and backward shapes of a training step (every linear layer, attention, the vocabulary head).
 *
 * tfjs-backend-webgpu's own kernel computes a 32x32 tile per workgroup, each thread a 4x4 block: two
 * workgroup-memory reads per multiply-add pair of values, about 17 TFLOP/s on an H200 (docs/training.md).
 * Here a workgroup of 256 threads computes a 128x128 tile, each thread an 8x8 block held in 16 vec4
 * registers, so one K step reads 4 vec4 from workgroup memory for 64 multiply-adds. Tiles are staged K-major
 * (As[k][m], Bs[k][n]) as vec4 along M and N whatever the operands' layout, so all four transpose cases
 * share the inner loop; only the loads from global memory differ. The next K slice is loaded into
 * registers while the current one is multiplied.
 *
 * Outputs too small to fill the GPU with 128x128 tiles take 64x64 tiles (4x4 per thread); a long K with few
 * such tiles (the vocabulary head's input gradient: K is the vocabulary) is split into slices whose partial
 * products a second dispatch sums. Outputs too small for two 64x64 tiles per core (k/v and LoRA products,
 * attention's key/value gradients) and the layers' weight gradients stay with tfjs's kernel, whose 32x32 and
 * small-output programs are as fast there on the H200. A fused op that needs the epilogue (the LoRA linear
 * layer) runs any shape here, small outputs with K split (anyPlan).
 *
 * The kernel replaces tfjs's BatchMatMul for the webgpu backend while the fused kernels are on
 * (lib/backend/webgpu/train/fused.ts); other dtypes and batch broadcasts other than "same" or "one" go to
 * tfjs's kernel, which stays registered as the fallback.
 */
import { tf } from "../../tf.js";
import { fusedKernelsActive } from "./fused.js";
import { elementwise, webgpuBackend, viewAs, type Program, type Uniform } from "./program.js";
import { registerTile, type GemmTile } from "../register-tile.js";
import { MAX_BINDING_BYTES } from "../../gpu-pool.js";

export type { GemmTile };

export const TILES: Record<string, GemmTile> = {
  large: { name: "large", BM: 128, BN: 128, TM: 8, TN: 8, BK: 16 },
  medium: { name: "medium", BM: 64, BN: 64, TM: 4, TN: 4, BK: 16 },
};

/** Streaming multiprocessors of the GPU the rule is tuned for (an H200 has 132). */
const GPU_CORES = 132;
/**
 * Workgroups from which large tiles pay: on any shape from this many; from LARGE_MIN_LONG_K_WORKGROUPS when K
 * is at least LONG_K (down projection); with a transposed left operand (weight gradients) only from
 * LARGE_MIN_WORKGROUPS_TA (the vocabulary head's).
 */
const LARGE_MIN_WORKGROUPS = 2 * GPU_CORES;
const LARGE_MIN_LONG_K_WORKGROUPS = 100;
const LONG_K = 2048;
const LARGE_MIN_WORKGROUPS_TA = 600;
/** Medium tiles from this many workgroups on; weight gradients below the large-tile count stay with tfjs. */
const MEDIUM_MIN_WORKGROUPS = 2 * GPU_CORES;
/** K from which a medium-tile product with few workgroups is split, and the most slices. */
const SPLIT_MIN_K = 8192;
const MAX_SLICES = 8;

export interface GemmShape {
  batch: number;
  M: number;
  N: number;
  K: number;
  transposeA: boolean;
  transposeB: boolean;
  /** Whether A / B have one matrix broadcast over the batch. */
  aBroadcast: boolean;
  bBroadcast: boolean;
}

export interface GemmPlan {
  tile: GemmTile;
  slices: number;
}

const workgroups = (s: GemmShape, t: GemmTile) => s.batch * Math.ceil(s.M / t.BM) * Math.ceil(s.N / t.BN);

/**
 * Picks the tile and the K split for a shape, or null when tfjs's kernel is as fast or faster: outputs
 * too small to give every core two 64x64 tiles, where tfjs's 32x32 and small-output programs win. The
 * thresholds come from runs of `T2S_GEMM_SWEEP=1 npm run bench:kernels -- --qwen05b --only matmul` on the
 * H200 (docs/training.md), which agree on the winner only where it wins clearly.
 * T2S_GEMM_TILE / T2S_GEMM_SLICES force a plan, for tuning.
 */
export function planGemm(s: GemmShape): GemmPlan | null {
  const forcedTile = process.env.T2S_GEMM_TILE;
  const forcedSlices = Number(process.env.T2S_GEMM_SLICES ?? 0);
  let tile: GemmTile;
  let slices = 1;
  if (forcedTile && TILES[forcedTile]) {
    tile = TILES[forcedTile];
    slices = forcedSlices > 0 ? forcedSlices : 1;
  } else {
    const large = workgroups(s, TILES.large);
    const medium = workgroups(s, TILES.medium);
    const longK = s.K >= SPLIT_MIN_K && medium >= GPU_CORES;
    if (s.transposeA ? large >= LARGE_MIN_WORKGROUPS_TA : large >= LARGE_MIN_WORKGROUPS || (large >= LARGE_MIN_LONG_K_WORKGROUPS && s.K >= LONG_K && !longK)) tile = TILES.large;
    else if (longK || (!s.transposeA && medium >= MEDIUM_MIN_WORKGROUPS)) tile = TILES.medium;
    else return null;
    if (longK && tile === TILES.medium && medium < 4 * GPU_CORES) slices = Math.ceil((4 * GPU_CORES) / medium);
  }
  if (s.batch !== 1) slices = 1;
  // the partial products are one buffer, which WebGPU binds only up to 2 GiB
  slices = Math.max(1, Math.min(slices, MAX_SLICES, Math.ceil(s.K / tile.BK), Math.floor(MAX_BINDING_BYTES / (4 * s.M * s.N))));
  return { tile, slices };
}

/**
 * What a product does with its result: scale it by `alpha` and, with `accumulate`, add it to what the output
 * buffer holds (C = alpha·A·B + C), so a LoRA branch adds onto the base product without an Add kernel.
 */
export interface GemmEpilogue {
  alpha: number;
  accumulate: boolean;
}

const PLAIN: GemmEpilogue = { alpha: 1, accumulate: false };

/** WGSL of one tile shape and transpose case; M, N, K, the slice length and batch strides are uniforms. */
function gemmProgram(s: GemmShape, plan: GemmPlan, outShape: number[], ep: GemmEpilogue): Program {
  // partial products of a split K are written raw; the slice sum applies the epilogue
  const raw = plan.slices > 1;
  const epilogue = (v: string, at: string) => (raw ? v : `${ep.alpha === 1 ? v : `uniforms.alpha * ${v}`}${ep.accumulate ? ` + result[${at}]` : ""}`);
  const { BM, BN, BK } = plan.tile;
  // A(m, k) and B(k, n) as stored: A [M, K] or [K, M] (transposeA), B [K, N] or [N, K] (transposeB)
  const tile = registerTile(plan.tile, (m, k) => `loadA(aOff, ${m}, ${k}, kEnd)`, (k, n) => `loadB(bOff, ${k}, ${n}, kEnd)`, s.transposeA ? "m" : "k", s.transposeB ? "k" : "n");
  const aIndex = s.transposeA ? "k * M + m" : "m * K + k";
  const bIndex = s.transposeB ? "n * K + k" : "k * N + n";
  const store: string[] = [];
  for (const o of tile.outputs) {
    store.push(`{ let m = ${o.m}; let n = ${o.n}; let o = cOff + m * N + n;`);
    store.push(`  if (m < M) {`);
    for (let q = 0; q < 4; q++) store.push(`    if (n + ${q}u < N) { result[o + ${q}u] = ${epilogue(`${o.acc}[${q}]`, `o + ${q}u`)}; }`);
    store.push(`  } }`);
  }
  const key = `t2s_gemm_${plan.tile.name}_${s.transposeA ? "t" : "n"}${s.transposeB ? "t" : "n"}${raw ? "_raw" : `${ep.alpha === 1 ? "" : "_alpha"}${ep.accumulate ? "_acc" : ""}`}`;
  return {
    variableNames: ["A", "B"],
    outputShape: outShape,
    shaderKey: key,
    dispatchLayout: { x: [0] },
    dispatch: [Math.ceil(s.N / BN), Math.ceil(s.M / BM), s.batch * plan.slices],
    workgroupSize: [tile.threads, 1, 1],
    uniforms: "M : i32, N : i32, K : i32, sliceK : i32, slices : i32, aStride : i32, bStride : i32, alpha : f32,",
    getUserCode: () => `
      ${tile.shared}
      var<workgroup> tileCount : u32;
      var<private> M : u32;
      var<private> N : u32;
      var<private> K : u32;
      fn loadA(off : u32, m : u32, k : u32, kEnd : u32) -> f32 {
        if (m < M && k < kEnd) { return A[off + ${aIndex}]; }
        return 0.0;
      }
      fn loadB(off : u32, k : u32, n : u32, kEnd : u32) -> f32 {
        if (n < N && k < kEnd) { return B[off + ${bIndex}]; }
        return 0.0;
      }
      fn main(index : i32) {
        M = u32(uniforms.M);
        N = u32(uniforms.N);
        K = u32(uniforms.K);
        let tid = localId.x;
        let tx = tid % ${tile.WX}u;
        let ty = tid / ${tile.WX}u;
        let n0 = workgroupId.x * ${BN}u;
        let m0 = workgroupId.y * ${BM}u;
        let slices = u32(uniforms.slices);
        let batch = workgroupId.z / slices;
        let slice = workgroupId.z % slices;
        let kBegin = slice * u32(uniforms.sliceK);
        let kEnd = min(K, kBegin + u32(uniforms.sliceK));
        let aOff = batch * u32(uniforms.aStride);
        let bOff = batch * u32(uniforms.bStride);
        // partial products of slice s land in block s of the output ([slices, M, N] when split)
        let cOff = workgroupId.z * M * N;
        ${tile.locals}
        var k0 = kBegin;
        ${tile.load}
        // the tile count is the same for the whole workgroup, but WGSL cannot prove it from workgroupId
        // (a private copy here): passing it through workgroup memory makes the barriers' control flow uniform
        if (tid == 0u) { tileCount = select(0u, (kEnd - kBegin + ${BK - 1}u) / ${BK}u, kEnd > kBegin); }
        let tiles = workgroupUniformLoad(&tileCount);
        for (var t = 0u; t < tiles; t = t + 1u) {
          workgroupBarrier();
          ${tile.stage}
          workgroupBarrier();
          k0 = k0 + ${BK}u;
          if (k0 < kEnd) {
            ${tile.load}
          }
          for (var kk = 0u; kk < ${BK}u; kk = kk + 1u) {
            ${tile.step}
          }
        }
        ${store.join("\n        ")}
      }`,
  };
}

/** Sums `slices` partial products [slices, M·N] into the output, with the product's epilogue. */
function sliceSumProgram(size: number, slices: number, ep: GemmEpilogue): Program {
  const terms = Array.from({ length: slices }, (_, s) => `P[index + ${s} * uniforms.size]`).join(" + ");
  return elementwise([size], `t2s_gemm_slice_sum_${slices}${ep.accumulate ? "_acc" : ""}`, ["P"], "alpha : f32,", `result[index] = uniforms.alpha * (${terms})${ep.accumulate ? " + result[index]" : ""};`);
}

/**
 * The plan of a product the kit's kernel must run whatever its shape (a fused op's, which needs the
 * epilogue): planGemm's, or medium tiles. (Splitting K of the LoRA products, whose one side is the rank,
 * was measured slower on the H200: the extra dispatches cost more than the idle cores.)
 */
export function anyPlan(s: GemmShape): GemmPlan {
  return planGemm(s) ?? { tile: TILES.medium, slices: 1 };
}

/**
 * C = alpha · op(A) · op(B) (+ C with `into`, which must be a [batch, M, N] buffer the caller owns) for
 * rank-3 A and B (batch first) through the kit's kernel; returns C [batch, M, N].
 */
export function runGemm(a: tf.TensorInfo, b: tf.TensorInfo, s: GemmShape, ep: GemmEpilogue = PLAIN, into?: tf.TensorInfo): tf.TensorInfo {
  const gpu = webgpuBackend();
  const plan = anyPlan(s);
  const sliceK = Math.ceil(Math.ceil(s.K / plan.slices) / plan.tile.BK) * plan.tile.BK;
  const slices = Math.ceil(s.K / sliceK);
  const used = { ...plan, slices };
  if (ep.accumulate && !into) throw new Error("runGemm: accumulate needs the output to add to");
  const uniforms: Uniform[] = [s.M, s.N, s.K, sliceK, slices, s.aBroadcast ? 0 : s.M * s.K, s.bBroadcast ? 0 : s.K * s.N].map((v) => ({ type: "int32" as const, data: [v] }));
  uniforms.push({ type: "float32", data: [ep.alpha] });
  if (slices === 1) return gpu.runWebGPUProgram(gemmProgram(s, used, [s.batch, s.M, s.N], ep), [a, b], "float32", uniforms, into);
  const partial = gpu.runWebGPUProgram(gemmProgram(s, used, [slices, s.M, s.N], ep), [a, b], "float32", uniforms);
  const size = s.M * s.N;
  const out = into ? viewAs(into, [size]) : undefined;
  const sum = gpu.runWebGPUProgram(sliceSumProgram(size, slices, ep), [viewAs(partial, [slices * size])], "float32", [{ type: "float32", data: [ep.alpha] }], out);
  gpu.disposeData(partial.dataId);
  return into ?? viewAs(sum, [1, s.M, s.N]);
}

type KernelFunc = (args: { inputs: tf.NamedTensorInfoMap; backend: tf.KernelBackend; attrs?: tf.NamedAttrMap }) => tf.TensorInfo | tf.TensorInfo[];

/** The shape of a BatchMatMul call, or null when the kit's kernel does not take it (tfjs's does). */
export function gemmShape(a: tf.TensorInfo, b: tf.TensorInfo, transposeA: boolean, transposeB: boolean): GemmShape | null {
  if (a.dtype !== "float32" || b.dtype !== "float32" || a.shape.length < 2 || b.shape.length < 2) return null;
  const ra = a.shape.length;
  const rb = b.shape.length;
  const M = transposeA ? a.shape[ra - 1] : a.shape[ra - 2];
  const K = transposeA ? a.shape[ra - 2] : a.shape[ra - 1];
  const N = transposeB ? b.shape[rb - 2] : b.shape[rb - 1];
  const Kb = transposeB ? b.shape[rb - 1] : b.shape[rb - 2];
  if (K !== Kb || M === 0 || N === 0 || K === 0) return null;
  const batchA = tf.util.sizeFromShape(a.shape.slice(0, -2));
  const batchB = tf.util.sizeFromShape(b.shape.slice(0, -2));
  const outer = (t: tf.TensorInfo) => t.shape.slice(0, -2);
  // same batch dims, or one side a single matrix; anything else is tfjs's broadcast
  const same = batchA === batchB && (batchA === 1 || outer(a).join() === outer(b).join());
  if (!same && batchA !== 1 && batchB !== 1) return null;
  // tiny outputs (a few hundred values) are faster through tfjs's reduction kernel
  const batch = Math.max(batchA, batchB);
  if (batch * M * N <= 256) return null;
  return { batch, M, N, K, transposeA, transposeB, aBroadcast: batchA === 1 && batch > 1, bBroadcast: batchB === 1 && batch > 1 };
}

let installed = false;
/** tfjs's own BatchMatMul kernel, kept when the kit's goes in front of it. */
let tfjsBatchMatMul: KernelFunc | null = null;

/** op(A) · op(B) on the kit's kernel when its plan takes the shape, on tfjs's otherwise (tfjs's output shape). */
function batchMatMul(a: tf.TensorInfo, b: tf.TensorInfo, transposeA: boolean, transposeB: boolean): tf.TensorInfo {
  const shape = gemmShape(a, b, transposeA, transposeB);
  if (!shape || !planGemm(shape)) {
    if (!tfjsBatchMatMul) throw new Error("the webgpu backend's BatchMatMul is not installed");
    return tfjsBatchMatMul({ inputs: { a, b }, backend: tf.backend(), attrs: { transposeA, transposeB } }) as tf.TensorInfo;
  }
  // the batch dims of the side that has the batch (both, when they match)
  const outer = tf.util.sizeFromShape(a.shape.slice(0, -2)) >= tf.util.sizeFromShape(b.shape.slice(0, -2)) ? a.shape.slice(0, -2) : b.shape.slice(0, -2);
  return viewAs(runGemm(a, b, shape), [...outer, shape.M, shape.N]);
}

/**
 * C [M, N] = op(A) · op(B) for 2-D operands as the BatchMatMul kernel would run it, for fused ops whose
 * plain products should go where they run fastest.
 */
export function matMulInfo(a: tf.TensorInfo, b: tf.TensorInfo, transposeA: boolean, transposeB: boolean): tf.TensorInfo {
  const out = batchMatMul(a, b, transposeA, transposeB);
  // tfjs's kernel answers 2-D operands with a batch of one
  return viewAs(out, out.shape.slice(-2));
}

/**
 * Puts the kit's kernel in front of tfjs's BatchMatMul on webgpu (once). Calls it does not take, and every
 * call while the fused kernels are off, go to the kernel tfjs registered.
 */
export function installBatchMatMul(): void {
  if (installed) return;
  const original = tf.getKernel("BatchMatMul", "webgpu");
  if (!original) return;
  installed = true;
  const fallback = original.kernelFunc as KernelFunc;
  tfjsBatchMatMul = fallback;
  tf.unregisterKernel("BatchMatMul", "webgpu");
  tf.registerKernel({
    kernelName: "BatchMatMul",
    backendName: "webgpu",
    kernelFunc: ((args) => {
      if (!fusedKernelsActive()) return fallback(args);
      const { a, b } = args.inputs as { a: tf.TensorInfo; b: tf.TensorInfo };
      const { transposeA, transposeB } = (args.attrs ?? {}) as { transposeA?: boolean; transposeB?: boolean };
      return batchMatMul(a, b, Boolean(transposeA), Boolean(transposeB));
    }) as KernelFunc as never,
  });
}
