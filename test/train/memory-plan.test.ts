/**
 * The memory plan: its lines add up to its peak, recompute and the sampler's release are chosen when the
 * device needs them, a plan over the device's memory is one error naming what to lower, and `t2s train
 * --plan` prints the plan and writes nothing.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { existsSync, readFileSync, writeFileSync } from "node:fs";
import { join, resolve } from "node:path";
import { spawnSync } from "node:child_process";
import { assertPlanFits, formatPlan, planMemory, poolRoom, rowsThatFit, WASM_HEAP_BYTES, type PlanInput } from "../../lib/train/memory-plan.js";
import { readConfig } from "../../lib/model/config.js";
import { tinyTrainingWorld } from "./tiny-world.js";
import { isT2sError } from "../../lib/core/errors.js";
import { MODEL_SHAPES } from "../../lib/model/shapes.js";
import { scratchDir } from "../helpers.js";

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
  const dir = scratchDir("t2s-plan-");
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
  // whole rows of 640 tokens under the 14,169-token cap: 22 rows a group
  assert.match(line(grouped).note, /14080 tokens' activations and their gradients/);
  assert.equal(poolRoom(grouped, 24 * GB), Math.min(24 * GB, 80 * GB - grouped.peak));
  assert.equal(poolRoom({ ...grouped, limit: null }, 24 * GB), 24 * GB);
  assert.equal(poolRoom({ ...grouped, limit: grouped.peak - 1 }, 24 * GB), 0);
});

/** The 7B step of docs/training.md as `t2s train --plan` sees it: 256 episodes of 640 tokens, 382 of them the shared prompt. */
function sevenB(over: Partial<PlanInput> = {}): PlanInput {
  return input("qwen2.5-7b", { microBatchRows: 256, rowTokens: 640, scoredTokens: 128, groupTokens: 14169, sampler: { slots: 256, maxLength: 640 }, sharedPrefix: 382, logitChunkTokens: 1024, ...over });
}

test("the 7B GRPO step at T2S_GPU_MEMORY_GB=48 takes a micro-batch that fits, layers recomputed", () => {
  const i = sevenB();
  const fit = rowsThatFit(i, 48 * GB);
  const p = planMemory({ ...i, ...fit }, 48 * GB);
  assert.ok(p.peak <= 48 * GB, formatPlan(p));
  assert.equal(p.recompute, true);
  assert.equal(p.releaseSampler, true, "the sampler's cache is freed before the update");
  assert.ok(fit.microBatchRows >= 32, `${fit.microBatchRows} rows per micro-batch`);
  // twice the rows would not fit: the plan takes the most
  assert.ok(planMemory({ ...i, microBatchRows: fit.microBatchRows * 2 }, 48 * GB).peak > 48 * GB);
  assert.match(formatPlan(p), new RegExp(`update: layer inputs kept +\\S+ GB +${fit.microBatchRows} rows: \\d+ tokens \\(382 shared, run once\\)`));
});

test("the shared prefix counts once, with its keys and values, in the layer inputs kept", () => {
  const kept = (p: ReturnType<typeof planMemory>) => p.lines.find((l) => l.what === "update: layer inputs kept")!.bytes;
  const c = sevenB().config;
  const shared = kept(planMemory(sevenB({ microBatchRows: 64, gradientCheckpointing: "on" }), null));
  const whole = kept(planMemory(sevenB({ microBatchRows: 64, gradientCheckpointing: "on", sharedPrefix: 0 }), null));
  const perToken = c.hiddenSize * 4 * c.numLayers;
  assert.equal(whole, 64 * 640 * perToken);
  assert.equal(shared, (64 * 258 + 382) * perToken + 382 * 2 * c.numKvHeads * c.headDim * 4 * c.numLayers);
});

test("logits in chunks: the plan holds one chunk's logits, not the micro-batch's", () => {
  const vocab = (over: Partial<PlanInput>) => {
    const i = sevenB({ microBatchRows: 128, ...over });
    return planMemory({ ...i, config: { ...i.config, vocabSize: 151936 } }, null).lines.find((l) => l.what === "update: logits")!;
  };
  const whole = vocab({ logitChunkTokens: 0 });
  const chunked = vocab({ logitChunkTokens: 1024 });
  // 128 rows x 128 scored x 151,936 x 4 B = 10 GB, forward and backward; a chunk of 1,024 positions is 0.62 GB
  // (both beside the 16-bit head's float32 copy, 2.2 GB)
  assert.ok(whole.bytes > 3 * 9.9 * GB, `${whole.bytes}`);
  assert.ok(chunked.bytes < whole.bytes / 5, `${chunked.bytes}`);
  assert.match(chunked.note, /1024 of 16384 scored positions at a time x vocab 151936/);
});

/**
 * Measured with `npm run bench:wasm-memory` (one GRPO update in a fresh process, every row its own prompt,
 * r8 LoRA on q/k/v/o): the peak bytes of tensors in the wasm heap during the step, and the heap afterwards.
 */
const WASM_MEASURED: Array<{ model: string; rows: number; prompt: number; reply: number; recompute: boolean; tensors: number; heap: number }> = [
  { model: "data/models/shop-sql-4m", rows: 2, prompt: 192, reply: 64, recompute: false, tensors: 434684772, heap: 539820032 },
  { model: "data/models/shop-sql-4m", rows: 8, prompt: 192, reply: 64, recompute: false, tensors: 1577612160, heap: 1677000704 },
  { model: "data/models/shop-sql-4m", rows: 4, prompt: 448, reply: 64, recompute: false, tensors: 1868484120, heap: 1908473856 },
  { model: "data/models/shop-sql-4m", rows: 2, prompt: 448, reply: 256, recompute: false, tensors: 1490955428, heap: 1600454656 },
  { model: "data/models/shop-sql-4m", rows: 2, prompt: 960, reply: 64, recompute: false, tensors: 2490732580, heap: 2525691904 },
  { model: "data/models/shop-sql-4m", rows: 2, prompt: 960, reply: 64, recompute: true, tensors: 751742168, heap: 905183232 },
  { model: "test/fixtures/model/qwen2", rows: 2, prompt: 960, reply: 64, recompute: false, tensors: 776003420, heap: 868286464 },
  { model: "test/fixtures/model/qwen2", rows: 4, prompt: 704, reply: 256, recompute: false, tensors: 1382999360, heap: 1519321088 },
];

test("on wasm the plan counts what the heap really holds: the ops' tape, the attention scores, the logits", () => {
  for (const m of WASM_MEASURED) {
    const c = readConfig(resolve(m.model));
    const weights = c.vocabSize * c.hiddenSize + c.numLayers * (c.hiddenSize * (c.numHeads + 2 * c.numKvHeads) * c.headDim + c.numHeads * c.headDim * c.hiddenSize + 3 * c.hiddenSize * c.intermediateSize);
    const lora = c.numLayers * 8 * 2 * (2 * c.hiddenSize + c.numHeads * c.headDim + c.numKvHeads * c.headDim);
    const p = planMemory({
      config: c, weightBytes: weights * 4, packed: false, trainable: lora, fullWeights: false, microBatchRows: m.rows, rowTokens: m.prompt + m.reply,
      scoredTokens: m.reply, sampler: null, reference: false, gradientCheckpointing: m.recompute ? "on" : "off", backend: "wasm", sharedPrefix: 0,
    }, WASM_HEAP_BYTES);
    const what = `${m.model} ${m.rows}x${m.prompt}+${m.reply}${m.recompute ? " recomputed" : ""}`;
    // the tensors within 10% of the plan's, and the heap (tensors and the allocator's own) under its peak
    // where the heap is large enough that its growth steps (a fifth at a time) are not what it shows
    assert.ok(m.tensors / p.update > 0.9 && m.tensors / p.update < 1.1, `${what}: tensors ${m.tensors} vs planned ${p.update}`);
    if (m.heap > 0.8 * GB) assert.ok(m.heap < p.peak, `${what}: heap ${m.heap} vs planned peak ${p.peak}`);
    assert.match(formatPlan(p), /of 4\.29 GB in the wasm heap/);
  }
});

test("a wasm run the plan says will not fit is refused before it starts, naming what to lower", async () => {
  const dir = tinyTrainingWorld("t2s-wasm-plan-");
  const config = join(dir, "grpo.json");
  // 8 rows of a 1,024-token budget on a prompt of ~290 tokens, every layer's attention scores kept
  writeFileSync(config, JSON.stringify({
    model: "model", tasks: "tasks.jsonl", output_dir: "out", seed: 1, steps: 1, prompts_per_step: 1, group_size: 8, micro_batch_rows: 8,
    adapter: { r: 2, alpha: 4 }, gradient_checkpointing: "off", sampling: { max_tokens: 1024 },
  }));
  const plan = spawnSync(process.execPath, [resolve("bin/t2s.js"), "train", "grpo", "--config", config, "--plan", "--backend", "wasm"], { encoding: "utf8" });
  assert.equal(plan.status, 0, plan.stderr);
  assert.match(plan.stdout, /update: attention scores .* 8 rows x \d+ tokens/);
  assert.match(plan.stdout, /peak +\d+\.\d+ GB +of 4\.29 GB in the wasm heap: does NOT fit/);
  const run = spawnSync(process.execPath, [resolve("bin/t2s.js"), "train", "grpo", "--config", config, "--backend", "wasm"], { encoding: "utf8" });
  assert.equal(run.status, 1);
  const errors = run.stderr.split("\n").filter((l) => l.startsWith("error"));
  assert.equal(errors.length, 1, run.stderr);
  assert.match(errors[0], /^error \[memory_plan\]: the run needs about \d+\.\d+ GB of wasm heap but the wasm heap holds at most 4\.29 GB; lower micro_batch_rows \(now 8; 4 fits\), the row length \(now \d+ tokens/);
  assert.match(errors[0], /gradient_checkpointing on/);
  assert.equal(existsSync(join(dir, "out", "train_log.jsonl")), false, "no step was taken");
  // with layers recomputed (gradient_checkpointing auto picks it) the same run fits
  writeFileSync(config, JSON.stringify({ ...JSON.parse(readFileSync(config, "utf8")), gradient_checkpointing: "auto" }));
  const auto = spawnSync(process.execPath, [resolve("bin/t2s.js"), "train", "grpo", "--config", config, "--plan", "--backend", "wasm"], { encoding: "utf8" });
  assert.match(auto.stdout, /of 4\.29 GB in the wasm heap; gradient checkpointing on/);
});

test("the sampler's cache is counted at its storage: a 16-bit cache is half of fp32's, and an over-limit plan offers it", () => {
  const wide = planMemory(input("qwen2.5-7b"), null);
  const narrow = planMemory(input("qwen2.5-7b", { sampler: { slots: 256, maxLength: 576, kvCacheDtype: "fp16" } }), null);
  const line = (p: typeof wide) => p.lines.find((l) => l.what === "sampler KV cache")!;
  // 256 x 576 tokens x 114,688 bytes (28 layers x 2 x 4 kv heads x 128 x 4)
  assert.equal(line(wide).bytes, 256 * 576 * 114_688);
  assert.equal(line(narrow).bytes * 2, line(wide).bytes);
  assert.match(line(narrow).note, /fp16/);
  const i = input("qwen2.5-7b", { microBatchRows: 256, gradientCheckpointing: "off" });
  assert.throws(() => assertPlanFits(planMemory(i, 100 * GB), i), (e) => isT2sError(e, "memory_plan") && /sampling\.kv_cache_dtype fp16/.test(e.message));
});
