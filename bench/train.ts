/**
 * Training throughput: tokens per second of one optimizer step (forward, backward, AdamW) for SFT and for
 * the optimisation phase of a GRPO step (sampling excluded: it is bench:generate's job), on a random model.
 *   npm run bench:train                          small Llama-shaped model, CPU backend, B4 x T64
 *   npm run bench:train -- --backend wasm        same on another backend
 *   npm run bench:train -- --qwen05b             Qwen2-0.5B-shaped model, B4 x T512, best backend
 * Flags: --shape NAME (lib/model/shapes.ts) --vocab N  --weights-dtype fp32|bf16 (the LoRA rows' frozen base)
 *        --recompute on (gradient checkpointing)  --batch N  --seq N  --steps N (timed steps after one warm-up)  --json
 *        --modes a,b  only these rows (default sft-full,sft-lora,grpo-lora,grpo-lora-kl)
 *        --profile  one more step of each mode under tf.profile: kernel time by kernel name, and how much of
 *                   the step's wall time no kernel accounts for (dispatch, read-backs, JS); each profile is
 *                   written to stderr as soon as it is measured, so a run cut by a timeout keeps it
 *        --tf-flags A=v,B=w  tfjs environment flags to set first (e.g. WEBGPU_DEFERRED_SUBMIT_BATCH_SIZE=64)
 * Rows: sft-full (all weights), sft-lora (r 16 on q,k,v,o), grpo-lora (dapo, mu 1), grpo-lora-kl (beta 0.04:
 * one more forward for the reference).
 */
import { useBackend } from "../lib/backend/select.js";
import { createAdapter } from "../lib/model/lora.js";
import { randomModel } from "../lib/model/random-model.js";
import { shapeParams } from "../lib/model/shapes.js";
import { tf } from "../lib/backend/tf.js";
import { GrpoTrainer, type Rollout } from "../lib/train/grpo.js";
import { ModelTrainable } from "../lib/train/trainable-model.js";
import { SeededRandom } from "../lib/core/random.js";
import { SftTrainer } from "../lib/train/sft.js";
import { applyTfFlags, benchShape, benchWeightsDtype, flag } from "./args.js";
import { printProfile, profileStep, type StepProfile } from "./step-profile.js";

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.floor(s.length / 2)];
}

async function main(): Promise<void> {
  const { config, big } = benchShape();
  const choice = await useBackend(flag("--backend") ?? (big ? "auto" : "cpu"));
  applyTfFlags();
  // 16-bit storage for the frozen base of the LoRA rows (full training keeps float32 masters)
  const weightsDtype = benchWeightsDtype();
  const recompute = flag("--recompute") === "on";
  const B = Number(flag("--batch") ?? 4);
  const T = Number(flag("--seq") ?? (big ? 512 : 64));
  const steps = Number(flag("--steps") ?? (big ? 3 : 1));
  const rng = new SeededRandom(7);
  // prompts take the first half of each row, completions (trained on) the second
  const rows = Array.from({ length: B }, () => ({ ids: Array.from({ length: T }, () => 1 + rng.below(config.vocabSize - 1)), mask: Array.from({ length: T }, (_, t) => (t >= T / 2 ? 1 : 0)) }));
  const results: Record<string, unknown>[] = [];
  const profile = process.argv.includes("--profile");
  const profiles: Record<string, StepProfile> = {};
  const modes = (flag("--modes") ?? "sft-full,sft-lora,grpo-lora,grpo-lora-kl").split(",");
  process.stderr.write(`backend ${choice.backend}; B ${B} x T ${T}; ${steps} timed steps after 1 warm-up\n`);
  for (const mode of modes) {
    const model = randomModel(config, { seed: 1, weightsDtype: mode !== "sft-full" && weightsDtype === "bf16" ? "bf16" : "fp32" });
    if (mode !== "sft-full") createAdapter(model, { name: "train", r: 16, alpha: 32, targetModules: ["q_proj", "k_proj", "v_proj", "o_proj"], seed: 1 });
    const lm = new ModelTrainable(model, mode === "sft-full" ? null : "train", { recompute });
    const trained = lm.trainableParams().reduce((s, p) => s + p.variable.size, 0);
    const times: number[] = [];
    if (mode.startsWith("sft")) {
      const t = new SftTrainer(lm, rows, { batchSize: B, steps: steps + 1, lr: 1e-5, seed: 1, maxGradNorm: 1 });
      for (let i = 0; i <= steps; i++) {
        const rec = await t.step();
        if (i > 0) times.push(rec.step_time_s as number);
      }
      if (profile) profiles[mode] = printProfile(mode, await profileStep(() => t.step()));
      t.dispose();
    } else {
      let k = 0;
      const sampler = async (prompts: number[], g: number): Promise<Rollout[][]> => prompts.map(() => Array.from({ length: g }, () => ({ rows: [rows[k++ % B]], truncated: false })));
      const grader = async () => ({ reward: rng.next(), correct: false });
      const t = new GrpoTrainer(lm, [0], sampler, grader, {
        steps: steps + 1, promptsPerStep: 1, groupSize: B, lossType: "dapo", beta: mode.endsWith("kl") ? 0.04 : 0, lr: 1e-6, seed: 1, maxCompletionLength: T / 2, maxGradNorm: 1,
        onWarning: () => undefined,
      });
      for (let i = 0; i <= steps; i++) {
        const rec = await t.step();
        if (i > 0) times.push(rec.train_time_s as number);
      }
      if (profile) profiles[mode] = printProfile(mode, await profileStep(() => t.step()));
      t.dispose();
    }
    const s = median(times);
    const row = { mode, backend: choice.backend, batch: B, seq: T, trained_params: trained, seconds_per_step: Number(s.toFixed(3)), tokens_per_s: Number(((B * T) / s).toFixed(1)) };
    results.push(row);
    process.stderr.write(`row ${JSON.stringify(row)}\n`);
    model.dispose();
  }
  const params = shapeParams(config);
  const summary = { backend: choice.backend, skipped: choice.skipped, model: big ? "qwen2-0.5b-shaped (random)" : "tiny llama (random, hidden 128, 2 layers, vocab 2048)", params, rows: results, profiles, tensors_after: tf.memory().numTensors };
  if (process.argv.includes("--json")) process.stdout.write(JSON.stringify(summary) + "\n");
  else {
    process.stdout.write(`backend ${summary.backend}; model ${summary.model}; ${params} parameters\n`);
    process.stdout.write("mode           batch  seq  trained params  s/step   tokens/s\n");
    for (const r of results) process.stdout.write(`${String(r.mode).padEnd(13)}  ${String(r.batch).padStart(5)}  ${String(r.seq).padStart(3)}  ${String(r.trained_params).padStart(14)}  ${String(r.seconds_per_step).padStart(6)}  ${String(r.tokens_per_s).padStart(9)}\n`);
  }
}


main().catch((e) => {
  process.stderr.write(`${e instanceof Error ? e.stack : String(e)}\n`);
  process.exit(1);
});
