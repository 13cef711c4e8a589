/**
 * The update half of a GRPO step of the kit's default model, as round 1 ran it (configs/
 * shop-sql-4m-grpo-r1.json): data/models/shop-sql-4m with a fresh r16 LoRA on every linear layer, 32 prompts
 * x 8 samples = 256 episodes, micro-batches of 64 rows, dapo, mu 1. The episodes are the base model's real
 * train-band rollouts (data/models/shop-sql-4m/eval/train-k8-band.jsonl.gz): their prompts rendered as the
 * trainer renders them and their replies tokenized, so the rows have the lengths and the shared prefix of
 * round 1. Sampling and grading are not timed (bench:generate measures sampling).
 *   npm run bench:grpo-update                          best backend
 *   npm run bench:grpo-update -- --backend webgpu --profile
 * Flags: --backend NAME  --steps N (timed steps after one warm-up, default 3)  --profile  --json
 *        --tf-flags A=v,B=w  tfjs environment flags to set first
 */
import { resolve } from "node:path";
import { readFileSync } from "node:fs";
import { useBackend } from "../lib/backend/select.js";
import { readJsonl } from "../lib/core/jsonl.js";
import { tf } from "../lib/backend/tf.js";
import { loadModel } from "../lib/model/load.js";
import { createAdapter } from "../lib/model/lora.js";
import { renderChat } from "../lib/model/chat.js";
import { openingMessages } from "../lib/episode/prompt.js";
import { schemaDdl } from "../lib/db/schema.js";
import { notesFor } from "../lib/db/notes.js";
import { readTasks } from "../lib/tasks/io.js";
import { GrpoTrainer, type Rollout } from "../lib/train/grpo.js";
import { ModelTrainable } from "../lib/train/trainable-model.js";
import type { RolloutRow } from "../lib/runs/row.js";
import { applyTfFlags, flag, intFlag, printTable } from "./args.js";
import { printProfile, profileStep } from "./step-profile.js";

// paths are relative to the working folder: the repository (npm run) or the GPU bundle, which links data/ and configs/
const ROOT = process.cwd();
const CONFIG = resolve(ROOT, "configs/shop-sql-4m-grpo-r1.json");

interface RoundConfig {
  adapter: { r: number; alpha: number; targets: string[] };
  prompts_per_step: number;
  group_size: number;
  epsilon_low: number;
  epsilon_high: number;
  micro_batch_rows: number;
  lr: number;
  max_grad_norm: number;
  sampling: { temperature: number; max_tokens: number };
  seed: number;
}

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.floor(s.length / 2)];
}

async function main(): Promise<void> {
  const choice = await useBackend(flag("--backend") ?? "auto");
  applyTfFlags();
  const steps = intFlag("--steps", 3);
  const cfg = JSON.parse(readFileSync(CONFIG, "utf8")) as RoundConfig;
  const model = await loadModel(resolve(ROOT, "data/models/shop-sql-4m"));
  createAdapter(model, { name: "train", r: cfg.adapter.r, alpha: cfg.adapter.alpha, targetModules: cfg.adapter.targets, seed: cfg.seed });
  const lm = new ModelTrainable(model, "train");
  const tok = model.requireTokenizer();
  const tasks = new Map(readTasks(resolve(ROOT, "data/shop/tasks.jsonl")).map((t) => [t.id, t]));
  const rows = readJsonl<RolloutRow>(resolve(ROOT, "data/models/shop-sql-4m/eval/train-k8-band.jsonl.gz")).records;
  const byTask = new Map<string, RolloutRow[]>();
  for (const r of rows) byTask.set(r.task_id, [...(byTask.get(r.task_id) ?? []), r]);
  const groups = [...byTask.values()].filter((g) => g.length >= cfg.group_size).slice(0, cfg.prompts_per_step);
  if (groups.length < cfg.prompts_per_step) throw new Error(`only ${groups.length} tasks with ${cfg.group_size} rollouts in the band file`);
  const eos = tok.encode("<|im_end|>", { addSpecialTokens: false });
  const episodes: Rollout[][] = groups.map((g) => {
    const task = tasks.get(g[0].task_id)!;
    const messages = openingMessages({ style: "single" }, schemaDdl(resolve(ROOT, "data/shop", task.db_path)), notesFor(task), task.question, task.evidence);
    const prompt = tok.encode(renderChat(tok, messages, { addGenerationPrompt: true }), { addSpecialTokens: false });
    return g.slice(0, cfg.group_size).map((r) => {
      const reply = [...tok.encode(r.turns[r.turns.length - 1].content ?? "", { addSpecialTokens: false }), ...eos].slice(0, cfg.sampling.max_tokens);
      return { rows: [{ ids: [...prompt, ...reply], mask: [...prompt.map(() => 0), ...reply.map(() => 1)] }], truncated: false, info: r.reward };
    });
  });
  const sampler = async () => episodes;
  const grader = async (_p: number, r: Rollout) => ({ reward: r.info as number, correct: (r.info as number) >= 1 });
  const trainer = new GrpoTrainer(lm, [...Array(cfg.prompts_per_step).keys()], sampler, grader, {
    steps: steps + 2, promptsPerStep: cfg.prompts_per_step, groupSize: cfg.group_size, lossType: "dapo", beta: 0, mu: 1,
    epsilonLow: cfg.epsilon_low, epsilonHigh: cfg.epsilon_high, lr: cfg.lr, maxGradNorm: cfg.max_grad_norm, seed: cfg.seed,
    maxMicroBatchRows: cfg.micro_batch_rows, temperature: cfg.sampling.temperature, maxCompletionLength: cfg.sampling.max_tokens,
    onWarning: () => undefined,
  });
  const tokens = episodes.flat().reduce((a, e) => a + e.rows[0].ids.length, 0);
  process.stderr.write(`backend ${choice.backend}; ${episodes.flat().length} episodes, ${tokens} tokens; ${steps} timed steps after 1 warm-up\n`);
  const times: number[] = [];
  // the rollouts are fixed, so the same seed gives the same trajectory: fused and ops runs can be compared
  const trajectory: Array<{ loss: number; grad_norm: number }> = [];
  let microBatches = 0;
  for (let i = 0; i <= steps; i++) {
    const rec = await trainer.step();
    if (i > 0) times.push(rec.train_time_s as number);
    microBatches = rec.micro_batches as number;
    trajectory.push({ loss: rec.loss as number, grad_norm: rec.grad_norm as number });
    process.stderr.write(`step ${i}: update ${rec.train_time_s} s, loss ${(rec.loss as number).toExponential(6)}, grad norm ${(rec.grad_norm as number).toExponential(6)}\n`);
  }
  const profile = process.argv.includes("--profile") ? printProfile("grpo-update", await profileStep(() => trainer.step())) : null;
  trainer.dispose();
  const s = median(times);
  const summary = { backend: choice.backend, episodes: episodes.flat().length, tokens, micro_batches: microBatches, seconds_per_update: Number(s.toFixed(3)), tokens_per_s: Math.round(tokens / s), trajectory, profile, tensors_after: tf.memory().numTensors };
  if (process.argv.includes("--json")) process.stdout.write(JSON.stringify(summary) + "\n");
  else printTable(["backend", "episodes", "tokens", "micro-batches", "s/update", "tokens/s"], [[summary.backend, String(summary.episodes), String(tokens), String(microBatches), String(summary.seconds_per_update), String(summary.tokens_per_s)]]);
}

main().catch((e) => {
  process.stderr.write(`error [bench]: ${(e as Error).message}\n`);
  process.exit(1);
});
