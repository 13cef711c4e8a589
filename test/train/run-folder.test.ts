import { test } from "node:test";
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { existsSync, mkdirSync, readFileSync, readdirSync, renameSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { takeLock } from "../../lib/runs/lock.js";
import { HANG_GUARD_MS, runCli, scratchDir, t2sBin } from "../helpers.js";
import { tinyTrainingWorld } from "./tiny-world.js";

const env = { T2S_BACKEND: "wasm" };
const sft = { batch_size: 2, lr: 0.01, adapter: { r: 2, targets: ["q_proj"] }, output_dir: "out", seed: 1, model: "model", tasks: "tasks.jsonl" };

function logSteps(dir: string): number[] {
  return readFileSync(join(dir, "out", "train_log.jsonl"), "utf8").trim().split("\n").map((l) => JSON.parse(l).step);
}

test("a second trainer on a folder in use is refused with one error line, and writes nothing there", async () => {
  const dir = tinyTrainingWorld("t2s-lock-");
  writeFileSync(join(dir, "c.json"), JSON.stringify({ ...sft, epochs: 1 }));
  mkdirSync(join(dir, "out"));
  const release = takeLock(join(dir, "out", "train.lock"), "out"); // this test process is the live trainer
  const r = await runCli(["train", "sft", "--config", join(dir, "c.json")], { env });
  release();
  assert.equal(r.code, 1);
  assert.match(r.stderr, /^error \[busy\]: output_dir .* is in use by process \d+/);
  assert.doesNotMatch(r.stderr, /\n\s+at /);
  assert.deepEqual(readdirSync(join(dir, "out")), []);
});

test("a run killed before its first checkpoint: the rerun logs each step once, takes over the lock, removes temp leftovers", async () => {
  const dir = tinyTrainingWorld("t2s-crash-");
  writeFileSync(join(dir, "long.json"), JSON.stringify({ ...sft, epochs: 500, checkpoint_every: 0 }));
  const child = spawn(process.execPath, [t2sBin, "train", "sft", "--config", join(dir, "long.json")], { env: { ...process.env, ...env }, stdio: "ignore" });
  const log = join(dir, "out", "train_log.jsonl");
  const deadline = Date.now() + HANG_GUARD_MS;
  while (Date.now() < deadline && !(existsSync(log) && readFileSync(log, "utf8").split("\n").length > 2)) await new Promise((r) => setTimeout(r, 20));
  child.kill("SIGKILL");
  await new Promise((r) => child.on("close", r));
  assert.ok(logSteps(dir).length >= 2, "the killed run logged steps");
  assert.ok(existsSync(join(dir, "out", "train.lock")), "the killed run left its lock");
  assert.ok(!existsSync(join(dir, "out", "checkpoints")), "no checkpoint before the kill");
  // leftovers of atomic writes killed midway
  mkdirSync(join(dir, "out", "checkpoints", "step-000007.tmp-99999999"), { recursive: true });
  writeFileSync(join(dir, "out", "config.json.tmp-99999999"), "{");

  writeFileSync(join(dir, "short.json"), JSON.stringify({ ...sft, epochs: 3 }));
  const r = await runCli(["train", "sft", "--config", join(dir, "short.json"), "--json"], { env });
  assert.equal(r.code, 0, r.stderr);
  assert.deepEqual(logSteps(dir), [0, 1, 2]);
  assert.deepEqual(readdirSync(join(dir, "out", "checkpoints")), ["step-000003"]);
  assert.deepEqual(readdirSync(join(dir, "out")).sort(), ["adapter", "checkpoints", "config.json", "train_log.jsonl", "train_tasks.json"]);
});

test("a run folder moved with its model and tasks resumes without --force; a real change still needs it", async () => {
  const dir = tinyTrainingWorld("t2s-move-");
  writeFileSync(join(dir, "c.json"), JSON.stringify({ ...sft, epochs: 2 }));
  const first = await runCli(["train", "sft", "--config", join(dir, "c.json"), "--max-seconds", "0"], { env });
  assert.equal(first.code, 0, first.stderr);
  // into a scratch folder of its own, which goes when the test file ends as the original would have
  const moved = join(scratchDir("t2s-moved-"), "run");
  renameSync(dir, moved);
  const changed = await runCli(["train", "sft", "--config", join(moved, "c.json"), "--resume"], { env, cwd: moved });
  assert.equal(changed.code, 0, changed.stderr);
  assert.match(changed.stderr, /resuming after step 1/);
  assert.doesNotMatch(changed.stderr, /changed config/);
  writeFileSync(join(moved, "c2.json"), JSON.stringify({ ...sft, epochs: 2, lr: 0.02 }));
  const lr = await runCli(["train", "sft", "--config", join(moved, "c2.json"), "--resume"], { env });
  assert.equal(lr.code, 1);
  assert.match(lr.stderr, /config_changed.*lr: 0.01 -> 0.02/);
});
