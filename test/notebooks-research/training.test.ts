/**
 * Notebooks 03 and 04 on the tiny Qwen2 test model (wasm backend): a two-step GRPO round with live
 * curves and a holdout checkpoint, then `t2s serve` with the adapter it wrote, scoring training prompts
 * through HTTP with PASS/FAIL checks.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync, writeFileSync, existsSync } from "node:fs";
import { join } from "node:path";
import { HANG_GUARD_MS, runCli } from "../helpers.js";
import { tinyTrainingWorld } from "../train/tiny-world.js";

function world(): { dir: string; config: string } {
  const dir = tinyTrainingWorld("t2s-nb-train-");
  const config = join(dir, "grpo.json");
  writeFileSync(config, JSON.stringify({
    model: "model", tasks: "tasks.jsonl", output_dir: "out", seed: 1, steps: 2, prompts_per_step: 1, group_size: 2, lr: 0.001, checkpoint_every: 1,
    adapter: { r: 2, alpha: 4 }, sampling: { max_tokens: 6 }, eval: { every: 2, split: "train", limit: 1 },
  }));
  return { dir, config };
}

test("notebooks 03 and 04: a GRPO round, then the served adapter checked through HTTP", async () => {
  const w = world();
  const report = join(w.dir, "report");
  const params: Record<string, string> = {
    config: w.config, backend: "wasm", refresh_ms: "500", report_dir: report,
    model: join(w.dir, "model"), adapter: join(w.dir, "out", "adapter"), train_log: join(w.dir, "out", "train_log.jsonl"),
    tasks: join(w.dir, "tasks.jsonl"), limit: "1", max_tokens: "6", out_dir: join(w.dir, "served"),
  };
  const args = ["notebooks", "run", "03-grpo-round", "04-serving-check", "--out", report, "--json", "--timeout-ms", String(HANG_GUARD_MS)];
  for (const [k, v] of Object.entries(params)) args.push("--param", `${k}=${v}`);
  const r = await runCli(args, { timeoutMs: 2 * HANG_GUARD_MS, env: { T2S_BACKEND: "wasm" } });
  assert.equal(r.code, 0, r.stdout + r.stderr);
  const results = JSON.parse(r.stdout) as Array<{ name: string; ok: boolean }>;
  assert.deepEqual(results.map((x) => x.ok), [true, true]);

  const nb03 = readFileSync(join(report, "03-grpo-round.html"), "utf8");
  for (const name of ["03-training-curves", "training-curves-live"]) assert.ok(nb03.includes(`data-t2s-figure="${name}"`), name);
  assert.ok(nb03.includes('data-t2s-table="03-holdout-checkpoints"'));
  assert.match(nb03, /step 2\/2 \| reward_mean/);
  assert.ok(existsSync(join(report, "figures", "03-training-curves.json")));

  const nb04 = readFileSync(join(report, "04-serving-check.html"), "utf8");
  assert.match(nb04, /served at http:\/\/127\.0\.0\.1:\d+\/v1/);
  for (const check of ["adapter weights map to the base \\(PEFT and vLLM names\\)", "served score matches the trainer&#39;s log|served score matches the trainer's log", "adapter is not a no-op", "every graded row used the intended turn"]) {
    assert.match(nb04, new RegExp(`(PASS|FAIL)</strong> (${check})`));
  }
  assert.ok(nb04.includes('data-t2s-table="04-serving-checks"'));
  assert.ok(nb04.includes('data-t2s-table="04-served-headline"'));
});
