import { test } from "node:test";
import assert from "node:assert/strict";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { checkAdapterPlacement, readRewardLog, checkTrainerAgreement } from "../../lib/report/serving.js";
import { servingStep } from "../../lib/report/notebook-steps.js";
import { kitPath } from "../../lib/core/paths.js";
import { HANG_GUARD_MS, scratchDir } from "../helpers.js";
import { startFakeOpenAI } from "../support/fake-openai.js";

const BASE = kitPath("data", "models", "shop-sql-4m");
const R1 = kitPath("data", "models", "shop-sql-4m-grpo-r1");

test("TRL's trainer_state.json log_history reads as a reward log the serving check compares with", () => {
  const dir = scratchDir("t2s-trl-");
  const file = join(dir, "trainer_state.json");
  writeFileSync(file, JSON.stringify({ global_step: 3, log_history: [
    { step: 1, reward: 0.2, reward_std: 0.3, kl: 0.01, "completions/mean_length": 40, loss: 0.1, learning_rate: 1e-6 },
    { step: 2, reward: 0.4, kl: 0.02, frac_reward_zero_std: 0.5 },
    { step: 2, eval_loss: 1.2 },
    { step: 3, reward: 0.6, entropy: 0.9, "clip_ratio/region_mean": 0.01 },
    { step: 3, train_runtime: 100, train_loss: 0.2 },
  ] }));
  const log = readRewardLog(file);
  assert.deepEqual(log.map((r) => r.step), [0, 1, 2]);
  assert.deepEqual(log.map((r) => r.reward_mean), [0.2, 0.4, 0.6]);
  assert.equal(log[0].completion_length_mean, 40);
  assert.equal(log[2].clip_ratio_region, 0.01);
  const served = [0.5, 0.5].map((reward, i) => ({ task_id: `t${i}`, sample: 0, correct: false, reward }));
  const c = checkTrainerAgreement(served, log);
  assert.equal(c.status, "PASS");
  assert.doesNotMatch(c.reason, /trainer 0\.400 \(correct/);
  writeFileSync(join(dir, "bad.json"), JSON.stringify({ steps: [] }));
  assert.throws(() => readRewardLog(join(dir, "bad.json")), /log_history/);
  // the kit's own log still reads as before
  assert.ok(readRewardLog(join(R1, "train_log.jsonl")).length > 0);
});

test("the placement check passes the round-1 adapter, skips without local folders, fails a mislaid layout", async () => {
  assert.equal(checkAdapterPlacement(BASE, R1).status, "PASS");
  assert.equal(checkAdapterPlacement(BASE, "/no/such/adapter").status, "SKIP");
  const { convertAdapter } = await import("../../lib/model/adapter-check.js");
  const moved = join(scratchDir("t2s-place-"), "mm");
  convertAdapter(R1, "peft-multimodal", moved);
  const c = checkAdapterPlacement(BASE, moved);
  assert.equal(c.status, "FAIL");
  assert.match(c.reason, /model\.language_model\.layers/);
});

test("the serving step scores an external OpenAI-compatible endpoint under the names it serves", { timeout: HANG_GUARD_MS }, async () => {
  const server = await startFakeOpenAI((req) => ({ content: req.body.model === "my-lora" ? "```sql\nSELECT 1\n```" : "no idea" }));
  try {
    const outDir = scratchDir("t2s-ext-");
    const step = await servingStep({ model: "/unused", adapter: "/unused", endpoint: server.url + "/v1", servedAdapter: "my-lora", servedBase: "my-base", tasks: kitPath("data", "shop", "tasks.jsonl"), limit: 3, k: 1, outDir });
    assert.equal(step.adapterRows.length, 3);
    assert.equal(step.baseRows.length, 3);
    assert.ok(step.adapterRows.every((r) => r.outcome !== "no_sql"));
    assert.ok(step.baseRows.every((r) => r.outcome === "no_sql"));
    assert.deepEqual([...new Set(server.requests.map((r) => r.body.model))].sort(), ["my-base", "my-lora"]);
    const noBase = await servingStep({ model: "/unused", adapter: "/unused", endpoint: server.url, servedAdapter: "my-lora", servedBase: "", tasks: kitPath("data", "shop", "tasks.jsonl"), limit: 2, outDir });
    assert.equal(noBase.baseRows.length, 0);
  } finally {
    await server.close();
  }
});
