import { test } from "node:test";
import assert from "node:assert/strict";
import { existsSync, mkdirSync, readFileSync, readdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { runCli } from "../helpers.js";
import { tinyTrainingWorld } from "./tiny-world.js";

/** A world small enough for CPU: the tiny Qwen2 fixture (context widened), a one-table database, two tasks. */
function world(): { dir: string; config: (over: Record<string, unknown>) => string } {
  const dir = tinyTrainingWorld("t2s-train-");
  const config = (over: Record<string, unknown>) => {
    const p = join(dir, `c${Math.random().toString(36).slice(2)}.json`);
    writeFileSync(p, JSON.stringify({ model: "model", tasks: "tasks.jsonl", output_dir: "out", seed: 1, ...over }));
    return p;
  };
  return { dir, config };
}

const env = { T2S_BACKEND: "wasm" }; // the CPU backend needs ~20 s per step on these prompts; wasm ~2 s

test("t2s train grpo runs real episodes, logs, checkpoints, evaluates and resumes", async () => {
  const w = world();
  const base = { steps: 2, prompts_per_step: 1, group_size: 2, lr: 0.001, checkpoint_every: 1, adapter: { r: 2, alpha: 4 }, sampling: { max_tokens: 6 }, eval: { every: 2, split: "train", limit: 1 } };
  const r = await runCli(["train", "grpo", "--config", w.config(base), "--json", "--backend", "wasm"], { env });
  assert.equal(r.code, 0, r.stderr);
  const summary = JSON.parse(r.stdout);
  assert.equal(summary.steps, 2);
  assert.equal(summary.backend, "wasm");
  assert.match(r.stderr, /step 2\/2 reward/);
  const log = readFileSync(join(w.dir, "out", "train_log.jsonl"), "utf8").trim().split("\n").map((l) => JSON.parse(l));
  assert.deepEqual(log.map((x) => x.step), [0, 1]);
  assert.equal(log[0].samples, 2);
  assert.equal(log[0].truncated_rate, 1, "6 tokens of a random model never finish");
  assert.equal(typeof log[1].eval_pass1, "number");
  // the group's two samples of one prompt: the second finds the first's blocks in the prefix cache
  for (const rec of log) assert.ok(rec.prefix_cache_hit_rate > 0 && rec.prefix_cache_hit_rate <= 1, `step ${rec.step} prefix_cache_hit_rate ${rec.prefix_cache_hit_rate}`);
  // the trainer's forward pass scores the sampled tokens as the KV-cache sampler did
  assert.ok(log[0].sampling_logp_diff_max < 1e-3, `sampling vs training log-prob gap ${log[0].sampling_logp_diff_max}`);
  // the rollout correction is on by default; an fp32 sampler and the learner agree, so nothing is clipped
  for (const rec of log) {
    for (const k of ["is_ratio_mean", "is_ratio_min", "is_ratio_max"]) assert.ok(Math.abs(rec[k] - 1) < 1e-4, `step ${rec.step} ${k} ${rec[k]}`);
    assert.equal(rec.is_clipped_frac, 0);
    assert.ok(Math.abs(rec.rollout_kl) < 1e-4 && Math.abs(rec.rollout_kl_k3) < 1e-8, `step ${rec.step} rollout_kl ${rec.rollout_kl} k3 ${rec.rollout_kl_k3}`);
  }
  assert.ok(existsSync(join(w.dir, "out", "adapter", "adapter_model.safetensors")));
  assert.ok(existsSync(join(w.dir, "out", "eval.jsonl")));
  const evalRow = JSON.parse(readFileSync(join(w.dir, "out", "eval.jsonl"), "utf8").trim().split("\n")[0]);
  assert.equal(evalRow.eval_run, "step-2");

  const again = await runCli(["train", "grpo", "--config", w.config(base)], { env });
  assert.equal(again.code, 1);
  assert.match(again.stderr, /output_exists.*--resume/);

  const more = await runCli(["train", "grpo", "--config", w.config({ ...base, steps: 3 }), "--resume", "--json"], { env });
  assert.equal(more.code, 0, more.stderr);
  assert.match(more.stderr, /resuming after step 2/);
  const log2 = readFileSync(join(w.dir, "out", "train_log.jsonl"), "utf8").trim().split("\n").map((l) => JSON.parse(l).step);
  assert.deepEqual(log2, [0, 1, 2]);
});

test("t2s train sft trains on gold replies with prompt tokens masked", async () => {
  const w = world();
  const r = await runCli(["train", "sft", "--config", w.config({ batch_size: 2, epochs: 3, lr: 0.01, adapter: { r: 4, targets: ["q_proj", "v_proj", "up_proj"] }, output_dir: "sft" }), "--json"], { env });
  assert.equal(r.code, 0, r.stderr);
  const log = readFileSync(join(w.dir, "sft", "train_log.jsonl"), "utf8").trim().split("\n").map((l) => JSON.parse(l));
  assert.equal(log.length, 3);
  assert.ok(log[2].loss < log[0].loss, `loss ${log[0].loss} -> ${log[2].loss}`);
  assert.ok(log[0].trained_tokens > 10 && log[0].trained_tokens < log[0].tokens / 2, "only the reply tokens are trained on");
});

test("t2s train --max-seconds stops after the running step with a checkpoint; --resume finishes the run", async () => {
  const w = world();
  const cfg = w.config({ batch_size: 2, epochs: 3, lr: 0.01, adapter: { r: 4, targets: ["q_proj"] }, output_dir: "budget" });
  const r = await runCli(["train", "sft", "--config", cfg, "--max-seconds", "0", "--json"], { env });
  assert.equal(r.code, 0, r.stderr);
  const summary = JSON.parse(r.stdout);
  assert.equal(summary.stopped_early, true);
  assert.equal(summary.steps_done, 1);
  assert.ok(existsSync(join(w.dir, "budget", "checkpoints", "step-000001")), "the step that passed the budget is checkpointed");
  const rest = await runCli(["train", "sft", "--config", cfg, "--resume", "--json"], { env });
  assert.equal(rest.code, 0, rest.stderr);
  const done = JSON.parse(rest.stdout);
  assert.equal(done.stopped_early, false);
  assert.equal(done.resumed_from + done.steps_done, 3);
});

test("keep_checkpoints keeps the newest N checkpoints; an incomplete folder is left alone", async () => {
  const w = world();
  const cfg = w.config({ batch_size: 2, epochs: 3, lr: 0.01, adapter: { r: 4, targets: ["q_proj"] }, output_dir: "keep", checkpoint_every: 1, keep_checkpoints: 2 });
  const partial = join(w.dir, "keep", "checkpoints", "step-000000");
  mkdirSync(partial, { recursive: true }); // no trainer_state.json: what a crash mid-write leaves
  const r = await runCli(["train", "sft", "--config", cfg, "--json"], { env });
  assert.equal(r.code, 0, r.stderr);
  assert.deepEqual(readdirSync(join(w.dir, "keep", "checkpoints")).sort(), ["step-000000", "step-000002", "step-000003"]);
  const bad = await runCli(["train", "sft", "--config", w.config({ epochs: 1, output_dir: "k2", keep_checkpoints: -1 })], { env });
  assert.equal(bad.code, 1);
  assert.match(bad.stderr, /keep_checkpoints/);
});

test("config errors name the field and exit 1; unknown flags exit 2", async () => {
  const w = world();
  const bad = await runCli(["train", "grpo", "--config", w.config({ steps: 1, group_size: 1 })], { env });
  assert.equal(bad.code, 1);
  assert.match(bad.stderr, /error \[bad_config\]: .*'group_size' must be an integer >= 2, got 1/);
  const flag = await runCli(["train", "grpo", "--config", w.config({ steps: 1 }), "--nope"], { env });
  assert.equal(flag.code, 2);
  const band = await runCli(["train", "grpo", "--config", w.config({ steps: 1, band: { rows: "none.jsonl", lo: 0.1, hi: 0.9 } })], { env });
  assert.equal(band.code, 1);
  assert.match(band.stderr, /error \[no_band_rows\]: .*none\.jsonl does not exist/);
});

test("--resume refuses a changed config naming each field; --force keeps the old config and logs the step", async () => {
  const w = world();
  const base = { batch_size: 2, epochs: 1, lr: 0.005, adapter: { r: 2, targets: ["q_proj"] }, output_dir: "rc" };
  const first = await runCli(["train", "sft", "--config", w.config(base), "--json"], { env });
  assert.equal(first.code, 0, first.stderr);
  const changed = w.config({ ...base, epochs: 2, lr: 0.05, seed: 2 });
  const refused = await runCli(["train", "sft", "--config", changed, "--resume"], { env });
  assert.equal(refused.code, 1);
  assert.match(refused.stderr, /^error \[config_changed\]: .*step 1 .*lr: 0\.005 -> 0\.05.*seed: 1 -> 2/);
  assert.doesNotMatch(refused.stderr, /epochs/, "more epochs add steps; they do not change the steps taken");
  assert.equal(JSON.parse(readFileSync(join(w.dir, "rc", "config.json"), "utf8")).lr, 0.005, "the record of the run is untouched");
  const same = await runCli(["train", "sft", "--config", w.config({ ...base, epochs: 2 }), "--resume", "--json"], { env });
  assert.equal(same.code, 0, same.stderr);
  const forced = await runCli(["train", "sft", "--config", w.config({ ...base, epochs: 3, lr: 0.05 }), "--resume", "--force", "--json"], { env });
  assert.equal(forced.code, 0, forced.stderr);
  assert.match(forced.stderr, /changed config \(lr: 0\.005 -> 0\.05\)/);
  assert.equal(JSON.parse(readFileSync(join(w.dir, "rc", "config.step-2.json"), "utf8")).lr, 0.005);
  assert.equal(JSON.parse(readFileSync(join(w.dir, "rc", "config.json"), "utf8")).lr, 0.05);
  const log = readFileSync(join(w.dir, "rc", "train_log.jsonl"), "utf8").trim().split("\n").map((l) => JSON.parse(l));
  const event = log.find((r) => r.event === "config_changed");
  assert.deepEqual({ at: event.at_step, changed: event.changed, previous: event.previous_config }, { at: 2, changed: ["lr: 0.005 -> 0.05"], previous: "config.step-2.json" });
  assert.deepEqual(log.filter((r) => r.event === undefined).map((r) => r.step), [0, 1, 2]);
});

test("an output_dir that is an existing file is one error line, no stack trace", async () => {
  const w = world();
  writeFileSync(join(w.dir, "afile"), "x");
  const r = await runCli(["train", "sft", "--config", w.config({ epochs: 1, output_dir: "afile" })], { env });
  assert.equal(r.code, 1);
  assert.match(r.stderr, /^error \[bad_config\]: output_dir .*afile is an existing file/);
  assert.doesNotMatch(r.stderr, /\n\s+at /);
});
