/**
 * The memory plan: its lines add up to its peak, recompute and the sampler's release are chosen when the
 * device needs them, a plan over the device's memory is one error naming what to lower, and `t2s train
 * --plan` prints the plan and writes nothing.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { existsSync, mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { spawnSync } from "node:child_process";
import { assertPlanFits, formatPlan, planMemory, poolRoom, type PlanInput } from "../../lib/train/memory-plan.js";
import { isT2sError } from "../../lib/core/errors.js";
import { MODEL_SHAPES } from "../../lib/model/shapes.js";

const GB = 1e9;

/** GRPO LoRA r16 on the 7 projections, 256 episodes, on a shape with the shop tokenizer's 4,096 ids. */
function input(shape: string, over: Partial<PlanInput> = {}): PlanInput {
  const config = { ...MODEL_SHAPES[shape](), vocabSize: 4096 };
  const c = config;
  const matrices = c.numLayers * (c.hiddenSize * (c.numHeads + 2 * c.numKvHeads) * c.headDim + c.numHeads * c.headDim * c.hiddenSize + 3 * c.hiddenSize * c.intermediateSize) + c.vocabSize * c.hiddenSize * (c.tieWordEmbeddings ? 1 : 2);
  const lora = c.numLayers * 16 * (c.hiddenSize * 5 + (c.numHeads + 2 * c.numKvHeads) * c.headDim + c.numHeads * c.headDim + 3 * c.intermediateSize);
  return {
    config, weightBytes: matrices * 2, packed: true, trainable: lora, fullWeights: false, microBatchRows: 16, rowTokens: 576, scoredTokens: 128,
    sampler: { slots: 256, maxLength: 576 }, reference: false, gradientCheckpointing: "auto", ...over,
  };
}

test("the plan's lines add up to its peak", () => {
  const p = planMemory(input("qwen2.5-3b"), 80 * GB);
  const sum = p.lines.reduce((s, l) => s + l.bytes, 0);
  // the sampling and update phases overlap only in what both hold; the lines list each tensor once
  assert.ok(sum >= p.peak * 0.99, `${sum} vs ${p.peak}`);
  assert.match(formatPlan(p), /peak .* of 80\.00 GB/);
});

test("7B LoRA GRPO at 256 episodes plans under 80 GB with recomputed layers and a freed sampler cache", () => {
  const p = planMemory(input("qwen2.5-7b"), 80 * GB);
  assert.ok(p.peak <= 80 * GB, formatPlan(p));
  assert.equal(p.recompute, true);
  // float32 storage of the same model needs about twice the weights
  const wide = planMemory(input("qwen2.5-7b", { packed: false, weightBytes: input("qwen2.5-7b").weightBytes * 2 }), 80 * GB);
  assert.ok(wide.lines[0].bytes > p.lines[0].bytes * 1.9);
});

test("a plan over the device's memory is one error naming micro_batch_rows and what fits", () => {
  const i = input("qwen2.5-7b", { microBatchRows: 256, gradientCheckpointing: "off" });
  const p = planMemory(i, 100 * GB);
  assert.ok(p.peak > 100 * GB);
  assert.throws(() => assertPlanFits(p, i), (e) => isT2sError(e, "memory_plan") && /micro_batch_rows \(now 256; \d+ fits\)/.test(e.message) && /gradient_checkpointing on/.test(e.message));
  // unknown memory: printed, never refused
  assert.doesNotThrow(() => assertPlanFits(planMemory(i, null), i));
});

test("auto leaves a small model's activations on the tape and its sampler cache in place", () => {
  const small = input("qwen2.5-0.5b", { microBatchRows: 8, packed: false });
  const p = planMemory(small, 139 * GB);
  assert.equal(p.recompute, false);
  assert.equal(p.releaseSampler, false);
});

test("t2s train --plan prints the plan and writes nothing", () => {
  const dir = mkdtempSync(join(tmpdir(), "t2s-plan-"));
  const cfg = join(dir, "cfg.json");
  writeFileSync(cfg, JSON.stringify({
    model: resolve("data/models/shop-sql-4m"), tasks: resolve("data/shop/tasks.jsonl"), split: "train", limit: 8,
    adapter: { r: 4, targets: ["q_proj", "v_proj"] }, prompts_per_step: 2, group_size: 4, steps: 1, sampling: { max_tokens: 64 }, output_dir: join(dir, "out"),
  }));
  const r = spawnSync(process.execPath, [resolve("bin/t2s.js"), "train", "grpo", "--config", cfg, "--plan", "--backend", "cpu"], { encoding: "utf8", env: { ...process.env, T2S_TEST: "1" } });
  assert.equal(r.status, 0, r.stderr);
  assert.match(r.stdout, /memory plan:/);
  assert.match(r.stdout, /sampler KV cache .* 8 sequences x \d+ tokens/);
  assert.match(r.stdout, /peak/);
  assert.equal(existsSync(join(dir, "out")), false, "--plan claims no output folder");
});

test("a row group bounds the recomputed layer's line, and the pool keeps no more than the plan's room", () => {
  const whole = planMemory(input("qwen2.5-7b", { microBatchRows: 128, rowTokens: 640, gradientCheckpointing: "on" }), 80 * GB);
  const grouped = planMemory(input("qwen2.5-7b", { microBatchRows: 128, rowTokens: 640, groupTokens: 14169, gradientCheckpointing: "on" }), 80 * GB);
  const line = (p: typeof whole) => p.lines.find((l) => l.what === "update: one layer recomputed")!;
  assert.ok(line(grouped).bytes < line(whole).bytes / 4, `${line(grouped).bytes} vs ${line(whole).bytes}`);
  assert.match(line(grouped).note, /14169 tokens' activations/);
  assert.equal(poolRoom(grouped, 24 * GB), Math.min(24 * GB, 80 * GB - grouped.peak));
  assert.equal(poolRoom({ ...grouped, limit: null }, 24 * GB), 24 * GB);
  assert.equal(poolRoom({ ...grouped, limit: grouped.peak - 1 }, 24 * GB), 0);
});
