/**
 * The training kernels of the webgpu backend have one registration entry point
 * (lib/backend/webgpu/train/register.ts, called by lib/backend/select.ts): it registers every one, and no
 * other module of lib/ registers them. Runs without a GPU: tfjs keeps kernels by backend name.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { readdirSync, readFileSync, statSync } from "node:fs";
import { join, relative } from "node:path";
import { tf } from "../../lib/backend/tf.js";
import { registerTrainingKernels } from "../../lib/backend/webgpu/train/register.js";
import { ATTENTION, ATTENTION_GRAD } from "../../lib/backend/webgpu/train/attention-train.js";
import { RMS_NORM, RMS_NORM_GRAD_W, RMS_NORM_GRAD_X } from "../../lib/backend/webgpu/train/layer-kernels.js";
import { TARGET_LOGPROBS, TARGET_LOGPROBS_GRAD } from "../../lib/backend/webgpu/train/logprob-kernels.js";
import { LORA_LINEAR, LORA_LINEAR_GRAD } from "../../lib/backend/webgpu/train/lora-linear.js";
import { SUM_OF_SQUARES } from "../../lib/backend/webgpu/train/optimizer.js";
import { ROPE, ROPE_GRAD, SWIGLU, SWIGLU_GRAD_GATE, SWIGLU_GRAD_UP } from "../../lib/backend/webgpu/train/rope-swiglu.js";
import { repoRoot } from "../helpers.js";

test("registerTrainingKernels registers every fused training kernel of the webgpu backend and the forward ones' gradients", () => {
  registerTrainingKernels();
  registerTrainingKernels();
  const kernels = [ATTENTION, ATTENTION_GRAD, RMS_NORM, RMS_NORM_GRAD_X, RMS_NORM_GRAD_W, TARGET_LOGPROBS, TARGET_LOGPROBS_GRAD, LORA_LINEAR, LORA_LINEAR_GRAD, SUM_OF_SQUARES, ROPE, ROPE_GRAD, SWIGLU, SWIGLU_GRAD_GATE, SWIGLU_GRAD_UP];
  assert.deepEqual(kernels.filter((k) => !tf.getKernel(k, "webgpu")), []);
  assert.deepEqual([ATTENTION, RMS_NORM, TARGET_LOGPROBS, LORA_LINEAR, ROPE, SWIGLU].filter((k) => !tf.getGradient(k)), []);
});

function sources(dir: string): string[] {
  return readdirSync(dir).flatMap((n) => (statSync(join(dir, n)).isDirectory() ? sources(join(dir, n)) : n.endsWith(".ts") ? [join(dir, n)] : []));
}

test("no module of lib/ but register.ts calls a training-kernel registration", () => {
  const call = /\b(register\w*Kernels|installBatchMatMul)\(\)(?!\s*:)/;
  const callers = sources(join(repoRoot, "lib"))
    .map((f) => relative(repoRoot, f))
    .filter((f) => f !== "lib/backend/webgpu/train/register.ts")
    .filter((f) => readFileSync(join(repoRoot, f), "utf8").split("\n").some((l) => call.test(l) && !/^\s*(export )?function /.test(l) && !/^\s*(\*|\/\/)/.test(l)));
  assert.deepEqual(callers, ["lib/backend/select.ts"]);
});
