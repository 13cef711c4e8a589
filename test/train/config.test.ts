import { test } from "node:test";
import assert from "node:assert/strict";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { readConfig, validateConfig } from "../../lib/train/config.js";
import { isT2sError } from "../../lib/core/errors.js";
import { scratchDir } from "../helpers.js";

const minimal = { model: "m", tasks: "t.jsonl", output_dir: "out", steps: 10 };

const rejects = (raw: unknown, field: RegExp, mode: "sft" | "grpo" = "grpo") =>
  assert.throws(() => validateConfig(raw, mode, "/cfg/c.json"), (e) => isT2sError(e, "bad_config") && field.test(e.message) && /\/cfg\/c\.json/.test(e.message));

test("a minimal GRPO config gets the documented defaults and absolute paths", () => {
  const c = validateConfig(minimal, "grpo", "/cfg/c.json");
  assert.equal(c.model, "/cfg/m");
  assert.equal(c.tasks, "/cfg/t.jsonl");
  assert.equal(c.output_dir, "/cfg/out");
  assert.deepEqual(c.adapter, { r: 8, alpha: 8, targets: ["q_proj", "v_proj"], use_rslora: false, init: null, allow_base_mismatch: false });
  assert.equal(c.loss_type, "dapo");
  assert.equal(c.epsilon_high, 0.28);
  assert.equal(c.group_size, 8);
  assert.equal(c.scale_rewards, "group");
  assert.equal(c.beta, 0);
  assert.equal(c.sampling.max_batch, 64);
  assert.equal(validateConfig({ ...minimal, sampling: { max_batch: 256 } }, "grpo").sampling.max_batch, 256);
  assert.equal(validateConfig({ ...minimal, loss_type: "cispo" }, "grpo").epsilon_high, 5);
  assert.equal(c.sampling.kv_cache_dtype, "auto");
  assert.equal(validateConfig({ ...minimal, sampling: { kv_cache_dtype: "fp16" } }, "grpo").sampling.kv_cache_dtype, "fp16");
});

test("errors name the field and the bad value", () => {
  rejects({ ...minimal, group_size: 1 }, /'group_size' must be an integer >= 2, got 1/);
  rejects({ ...minimal, loss_type: "ppo" }, /'loss_type' must be one of "grpo", "bnpo", "dr_grpo", "dapo", "cispo"/);
  rejects({ ...minimal, adapter: { r: 0 } }, /'adapter\.r'/);
  rejects({ ...minimal, adapter: { rank: 8 } }, /'adapter\.rank' is not a known field/);
  rejects({ ...minimal, band: { rows: "r.jsonl", lo: 0.9, hi: 0.1 } }, /'band\.lo' must not exceed band\.hi/);
  rejects({ ...minimal, band: { lo: 0.1 } }, /'band\.rows' is required/);
  rejects({ ...minimal, sampling: { temperature: 0 } }, /'sampling\.temperature' must be a number > 0/);
  rejects({ ...minimal, sampling: { max_batch: 0 } }, /'sampling\.max_batch' must be an integer >= 1/);
  rejects({ ...minimal, sampling: { kv_cache_dtype: "fp8" } }, /'sampling\.kv_cache_dtype' must be one of "auto", "fp16", "bf16", "fp32"/);
  rejects({ ...minimal, lerning_rate: 1 }, /'lerning_rate' is not a known field/);
  rejects({ ...minimal, loss_type: "cispo", epsilon_high: 0.28 }, /'epsilon_high' is the absolute cap/);
  rejects({ ...minimal, full_weights: true, beta: 0.1 }, /'beta' needs a reference/);
  rejects({ tasks: "t", output_dir: "o", steps: 1 }, /'model' is required/);
  rejects({ ...minimal, mode: "sft" }, /'mode' says this file is for 'sft'/);
  rejects({ ...minimal, group_size: 4 }, /'group_size' applies to 'grpo' training, not 'sft'/, "sft");
  rejects([1, 2], /one JSON object/);
});

test("SFT configs default to epochs and batch size", () => {
  const c = validateConfig({ model: "m", tasks: "t", output_dir: "o", batch_size: 4, epochs: 2, full_weights: true }, "sft");
  assert.equal(c.steps, 0);
  assert.equal(c.batch_size, 4);
  assert.equal(c.adapter, null);
});

test("readConfig reports missing files and bad JSON", () => {
  const dir = scratchDir();
  const p = join(dir, "c.json");
  writeFileSync(p, "{ nope");
  assert.throws(() => readConfig(p, "grpo"), (e) => isT2sError(e, "bad_config") && /not valid JSON/.test(e.message));
  assert.throws(() => readConfig(join(dir, "none.json"), "grpo"), (e) => isT2sError(e, "not_found"));
  writeFileSync(p, JSON.stringify(minimal));
  assert.equal(readConfig(p, "grpo").tasks, join(dir, "t.jsonl"));
});

test("null is refused where the default is not off: \"lr\": null is a mistake, not the default", () => {
  rejects({ ...minimal, lr: null }, /lr.*is null/);
  rejects({ ...minimal, sampling: { temperature: null } }, /sampling\.temperature.*is null/);
  // where the default is off, null still means off
  assert.equal(validateConfig({ ...minimal, limit: null, backend: null }, "grpo", "/cfg/c.json").limit, null);
});

test("the rollout correction takes TRL's names: on, token_truncate, cap 2 by default; modes and cap are checked", () => {
  const c = validateConfig(minimal, "grpo");
  assert.equal(c.vllm_importance_sampling_correction, true);
  assert.equal(c.vllm_importance_sampling_mode, "token_truncate");
  assert.equal(c.vllm_importance_sampling_cap, 2);
  const set = validateConfig({ ...minimal, vllm_importance_sampling_correction: false, vllm_importance_sampling_mode: "token_mask", vllm_importance_sampling_cap: 3 }, "grpo");
  assert.deepEqual([set.vllm_importance_sampling_correction, set.vllm_importance_sampling_mode, set.vllm_importance_sampling_cap], [false, "token_mask", 3]);
  rejects({ ...minimal, vllm_importance_sampling_mode: "sequence_mask" }, /'vllm_importance_sampling_mode' must be one of "token_truncate", "token_mask"/);
  rejects({ ...minimal, vllm_importance_sampling_cap: 0.5 }, /'vllm_importance_sampling_cap' must be a number >= 1, got 0.5/);
  rejects({ ...minimal, vllm_importance_sampling_correction: "yes" }, /'vllm_importance_sampling_correction' must be true or false/);
  rejects({ ...minimal, vllm_importance_sampling_cap: 2 }, /'vllm_importance_sampling_cap' applies to 'grpo' training, not 'sft'/, "sft");
});
