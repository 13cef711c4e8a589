/**
 * The `kv_cache_dtype` setting off the GPU (lib/model/kv-cache-dtype.ts, resolved in
 * lib/model/engine/runners.ts): the flag's parser, bytes per token at real shapes, auto resolving to fp32
 * on the tfjs-ops runner, and a 16-bit choice there refused as one error naming the flag, from the library,
 * from the engine's runner lease, and from `t2s serve` and `t2s benchmark`.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { join } from "node:path";
import { isT2sError } from "../../lib/core/errors.js";
import { loadModel } from "../../lib/model/load.js";
import { MODEL_SHAPES } from "../../lib/model/shapes.js";
import { applyKvCacheDtype, leaseRunner, resolveKvCacheDtype } from "../../lib/model/engine/runners.js";
import { kvCacheBytesPerToken, kvCacheDtypeOption } from "../../lib/model/kv-cache-dtype.js";
import { runCli, scratchDir } from "../helpers.js";
import { fixtureDir } from "./fixtures.js";

test("--kv-cache-dtype takes auto, fp16, bf16 and fp32 (any case); anything else is a usage error naming the choices", () => {
  assert.equal(kvCacheDtypeOption("FP16"), "fp16");
  assert.equal(kvCacheDtypeOption("auto"), "auto");
  assert.throws(() => kvCacheDtypeOption("fp8"), (e) => isT2sError(e, "usage") && /--kv-cache-dtype must be one of auto, fp16, bf16, fp32, got 'fp8'/.test(e.message));
});

test("bytes per cached token: keys and values of every layer and kv head, halved by a 16-bit cache", () => {
  const half = MODEL_SHAPES["qwen2.5-0.5b"]();
  const seven = MODEL_SHAPES["qwen2.5-7b"]();
  // 24 layers x 2 x 2 kv heads x 64; 28 layers x 2 x 4 kv heads x 128
  assert.equal(kvCacheBytesPerToken(half, "fp32"), 24_576);
  assert.equal(kvCacheBytesPerToken(half, "fp16"), 12_288);
  assert.equal(kvCacheBytesPerToken(seven, "fp32"), 114_688);
  assert.equal(kvCacheBytesPerToken(seven, "bf16"), 57_344);
});

test("on the tfjs-ops runner auto and fp32 resolve to fp32, and a 16-bit cache is one error naming the flag", async () => {
  const model = await loadModel(fixtureDir("qwen2"), { backend: "cpu" });
  try {
    assert.equal(resolveKvCacheDtype(model), "fp32");
    applyKvCacheDtype(model, "fp32");
    assert.equal(resolveKvCacheDtype(model), "fp32");
    for (const d of ["fp16", "bf16"] as const) {
      assert.throws(() => applyKvCacheDtype(model, d), (e) => isT2sError(e, "kv_cache_dtype_unsupported") && new RegExp(`--kv-cache-dtype ${d} runs on the WebGPU step runner.*runs on cpu`).test(e.message));
      assert.equal(model.kvCacheDtype, "fp32", "a refused choice leaves the setting as it was");
    }
    // set around the check (a library caller), the lease refuses it before building a runner
    model.kvCacheDtype = "bf16";
    await assert.rejects(leaseRunner(model, { adapter: null, slots: 2 }), (e) => isT2sError(e, "kv_cache_dtype_unsupported"));
  } finally {
    model.dispose();
  }
});

/** One `error [code]: message` line on stderr (a model's load line aside), no stack trace. */
function assertOneLine(stderr: string, code: string, what: string): void {
  const lines = stderr.split("\n").filter((l) => l.trim() !== "" && !/^(model |loaded )/.test(l));
  assert.equal(lines.length, 1, `${what}: ${stderr}`);
  assert.match(lines[0], new RegExp(`^error \\[${code}\\]: `), what);
}

test("t2s serve and t2s benchmark refuse a 16-bit KV cache off WebGPU with one line, and an unknown dtype as usage", async () => {
  const env = { T2S_BACKEND: "cpu" };
  const model = fixtureDir("qwen2");
  const serve = await runCli(["serve", "--model", model, "--port", "0", "--kv-cache-dtype", "fp16"], { env });
  assert.equal(serve.code, 1, serve.stderr);
  assertOneLine(serve.stderr, "kv_cache_dtype_unsupported", "serve");
  assert.match(serve.stderr, /--kv-cache-dtype fp16 runs on the WebGPU step runner/);
  const bench = await runCli(["benchmark", "--policy", `tfjs:${model}`, "--tasks", "data/shop/tasks.jsonl", "--limit", "1", "--k", "1", "--out", join(scratchDir(), "rows.jsonl"), "--quiet", "--kv-cache-dtype", "bf16"], { env });
  assert.equal(bench.code, 1, bench.stderr);
  assertOneLine(bench.stderr, "kv_cache_dtype_unsupported", "benchmark");
  const bad = await runCli(["serve", "--model", model, "--kv-cache-dtype", "fp8"], { env });
  assert.equal(bad.code, 2, bad.stderr);
  assertOneLine(bad.stderr, "usage", "serve --kv-cache-dtype fp8");
});
