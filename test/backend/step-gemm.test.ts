/**
 * The step runner's linear-layer launch arithmetic (lib/backend/webgpu/step/gemm.ts), which needs no GPU:
 * every launch stays within WebGPU's 65535 workgroups per dimension and covers every output column, at
 * the shapes the sizes run (vocabulary-wide heads included). The kernels themselves are checked against
 * the CPU in test/model/webgpu-runner.test.ts.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { gemmGroups, gemvLayout, splitsFor, tileFor, type GemmSpec } from "../../lib/backend/webgpu/step/gemm.js";

const spec = (K: number, N: number, rows: number): GemmSpec => ({ K, N, lda: K, ldo: N, off: 0, bias: false, mode: "store", scale: 1, swiglu: false, rows: "M", splits: splitsFor(K, N, rows) });

test("step GEMM: launches fit 65535 workgroups a dimension and cover every column", () => {
  for (const K of [16, 64, 896, 2048, 3584, 4864, 18944])
    for (const N of [4, 128, 896, 4096, 151936, 152064, 600000])
      for (const rows of [1, 8, 9, 64, 65, 1024]) {
        const s = spec(K, N, rows);
        const g = gemmGroups(s, rows);
        for (const d of g) assert.ok(d >= 1 && d <= 65535, `K ${K} N ${N} rows ${rows}: ${g}`);
        if (rows <= 8) {
          assert.equal(s.splits, 1, "the few-rows kernel never splits K");
          assert.ok(g[0] * g[1] * gemvLayout(K).cols >= N, `K ${K} N ${N}: ${g} misses columns`);
        } else {
          const t = tileFor(rows);
          assert.ok(g[0] * t.BN >= N && g[1] * t.BM >= rows && g[2] === s.splits);
        }
      }
});

test("step GEMM: the few-rows layout gives each lane whole vec4 loads and a power-of-two lane count", () => {
  for (const K of [16, 64, 96, 896, 2048, 4864, 11008]) {
    const { vec, lanes, cols } = gemvLayout(K);
    assert.equal(vec, 4);
    assert.ok([32, 64, 128, 256].includes(lanes) && lanes * cols === 256);
  }
  assert.equal(gemvLayout(18).vec, 1, "a K that is not a multiple of 4 reads scalars");
  assert.ok(gemvLayout(11008).lanes > gemvLayout(896).lanes, "a longer K spreads over more lanes");
});
