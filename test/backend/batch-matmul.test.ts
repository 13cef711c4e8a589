/**
 * The kit's BatchMatMul kernel (lib/backend/webgpu/train/batch-matmul.ts): every tile and K split, every transpose
 * case, batch broadcasts and edge sizes against the CPU backend's matMul; the plan rule on its own.
 * The kernel needs a WebGPU adapter; without a GPU, Mesa's software Vulkan driver provides one:
 *   VK_DRIVER_FILES=/opt/lvp/lvp_icd.json XDG_RUNTIME_DIR=/tmp node scripts/run-tests.mjs test/backend/batch-matmul.test.ts
 * When no adapter can be created the GPU tests are skipped with the reason.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { useBackend } from "../../lib/backend/select.js";
import { tf } from "../../lib/backend/tf.js";
import { anyPlan, gemmShape, planGemm, type GemmShape } from "../../lib/backend/webgpu/train/batch-matmul.js";
import { useFusedKernels } from "../../lib/backend/webgpu/train/fused.js";

const shape = (o: Partial<GemmShape>): GemmShape => ({ batch: 1, M: 2048, N: 896, K: 896, transposeA: false, transposeB: false, aBroadcast: false, bBroadcast: false, ...o });

test("plan: large tiles for wide outputs, medium for weight gradients, K split for a long K, tfjs for small outputs", () => {
  assert.equal(planGemm(shape({ N: 4864, transposeB: true }))?.tile.name, "large");
  assert.equal(planGemm(shape({ M: 4864, N: 896, K: 2048, transposeA: true })), null, "weight gradients of the layers: tfjs");
  assert.equal(planGemm(shape({ M: 151936, N: 896, K: 1024, transposeA: true }))?.tile.name, "large");
  const head = planGemm(shape({ M: 1024, N: 896, K: 151936 }));
  assert.equal(head?.tile.name, "medium");
  assert.ok(head!.slices > 1, "the head's input gradient is split along K");
  assert.equal(planGemm(shape({ M: 128, N: 896, K: 2048, transposeA: true })), null, "k/v weight gradient: tfjs");
  assert.equal(planGemm(shape({ batch: 8, M: 512, N: 64, K: 3584, transposeA: true })), null, "attention dV: tfjs");
});

test("anyPlan: planGemm's plan, or medium tiles for the shapes planGemm leaves to tfjs", () => {
  assert.equal(anyPlan(shape({ N: 4864, transposeB: true })).tile.name, "large");
  assert.deepEqual(anyPlan(shape({ M: 2048, N: 16, K: 4864 })), { tile: anyPlan(shape({ M: 64, N: 64, K: 64 })).tile, slices: 1 });
  assert.equal(anyPlan(shape({ M: 2048, N: 16, K: 4864 })).tile.name, "medium");
});

test("shape: tfjs keeps other dtypes, mismatched batches and tiny outputs", () => {
  const info = (s: number[], dtype: "float32" | "int32" = "float32") => ({ dataId: {}, shape: s, dtype }) as tf.TensorInfo;
  assert.equal(gemmShape(info([4, 5], "int32"), info([5, 6]), false, false), null);
  assert.equal(gemmShape(info([2, 40, 50]), info([3, 50, 60]), false, false), null);
  assert.equal(gemmShape(info([4, 5]), info([5, 6]), false, false), null);
  assert.deepEqual(gemmShape(info([40, 50]), info([3, 50, 60]), false, false), { batch: 3, M: 40, N: 60, K: 50, transposeA: false, transposeB: false, aBroadcast: true, bBroadcast: false });
  assert.deepEqual(gemmShape(info([2, 3, 50, 40]), info([2, 3, 60, 50]), true, true), { batch: 6, M: 40, N: 60, K: 50, transposeA: true, transposeB: true, aBroadcast: false, bBroadcast: false });
});

const CASES: Array<[number[], number[], boolean, boolean]> = [
  [[37, 45], [45, 29], false, false],
  [[37, 45], [29, 45], false, true],
  [[45, 37], [45, 29], true, false],
  [[45, 37], [29, 45], true, true],
  [[3, 130, 70], [3, 70, 133], false, false],
  [[3, 130, 70], [70, 133], false, false],
  [[130, 70], [3, 133, 70], false, true],
  [[2, 2, 65, 64], [2, 2, 129, 64], false, true],
  [[1, 17], [17, 300], false, false],
  [[300, 1], [1, 257], false, false],
  [[600, 24], [600, 40], true, false],
];

const values = (s: number[], seed: number) => Float32Array.from({ length: s.reduce((a, b) => a * b, 1) }, (_, i) => Math.sin(i * 1.37 + seed));

test("every tile and K split matches the CPU backend", async (t) => {
  const want: Float32Array[] = [];
  await useBackend("cpu");
  for (const [sa, sb, ta, tb] of CASES) want.push((await tf.matMul(tf.tensor(values(sa, 1), sa), tf.tensor(values(sb, 2), sb), ta, tb).data()) as Float32Array);
  try {
    await useBackend("webgpu");
  } catch (e) {
    t.skip(`no WebGPU adapter: ${(e as Error).message}`);
    return;
  }
  try {
    for (const [tile, slices] of [["large", 0], ["medium", 0], ["medium", 3], ["large", 2]] as const) {
      process.env.T2S_GEMM_TILE = tile;
      process.env.T2S_GEMM_SLICES = String(slices);
      for (const [i, [sa, sb, ta, tb]] of CASES.entries()) {
        const a = tf.tensor(values(sa, 1), sa);
        const b = tf.tensor(values(sb, 2), sb);
        const got = tf.matMul(a, b, ta, tb);
        const v = await got.data();
        assert.equal(v.length, want[i].length);
        let err = 0;
        for (let j = 0; j < v.length; j++) err = Math.max(err, Math.abs(v[j] - want[i][j]) / (1 + Math.abs(want[i][j])));
        assert.ok(err < 1e-5, `${tile}/${slices} ${sa}·${sb} (${ta},${tb}): error ${err}`);
        tf.dispose([a, b, got]);
      }
    }
    // the kernel really runs: with the fused kernels off, tfjs's kernel gives the same numbers by another route
    useFusedKernels(false);
    const a = tf.tensor(values([37, 45], 1), [37, 45]);
    const off = await tf.matMul(a, tf.tensor(values([45, 29], 2), [45, 29])).data();
    useFusedKernels(true);
    assert.ok(off.every((x, j) => Math.abs(x - want[0][j]) < 1e-4));
  } finally {
    delete process.env.T2S_GEMM_TILE;
    delete process.env.T2S_GEMM_SLICES;
    useFusedKernels(true);
    await useBackend("cpu");
  }
});
