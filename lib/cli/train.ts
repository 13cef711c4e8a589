/** `t2s train sft|grpo --config FILE`: supervised fine-tuning or GRPO on the in-process model. */
import type { Command } from "commander";
import { existsSync } from "node:fs";
import { T2sError } from "../core/errors.js";
import { readConfig, type TrainMode } from "../train/config.js";
import { runTraining } from "../train/run.js";
import { checkpointStep, latestCheckpoint } from "../train/checkpoint.js";
import { commandLine, onInterrupt } from "./interrupt.js";
import { numberOption, printJson } from "./options.js";

interface TrainFlags {
  config: string;
  resume?: boolean;
  force?: boolean;
  backend?: string;
  maxSeconds?: number;
  plan?: boolean;
  json?: boolean;
  quiet?: boolean;
}

const fmt = (v: unknown, digits = 3) => (typeof v === "number" ? (Number.isInteger(v) ? String(v) : v.toFixed(digits)) : String(v ?? "-"));

/** One progress line per step (stderr), the fields a person watches. */
export function stepLine(mode: TrainMode, r: Record<string, unknown>, total: number): string {
  const step = `step ${Number(r.step) + 1}/${total}`;
  if (mode === "sft") return `${step} loss ${fmt(r.loss, 4)} lr ${fmt(r.lr, 6)} grad ${fmt(r.grad_norm)} ${fmt(r.tokens_per_s, 0)} tok/s ${fmt(r.step_time_s, 1)}s`;
  const ev = r.eval_pass1 !== undefined ? ` eval pass@1 ${fmt(r.eval_pass1)}` : "";
  return `${step} reward ${fmt(r.reward_mean)}±${fmt(r.reward_std)} correct ${fmt(r.correct_rate)} zero-std ${fmt(r.frac_reward_zero_std, 2)} kl ${fmt(r.kl, 4)} clip ${fmt(r.clip_ratio_region)} len ${fmt(r.completion_length_mean, 0)} trunc ${fmt(r.truncated_rate, 2)} ${fmt(r.step_time_s, 1)}s${ev}`;
}

function addMode(train: Command, mode: TrainMode, what: string): void {
  train
    .command(mode)
    .description(what)
    .requiredOption("--config <file>", "training config (JSON; fields in docs/training.md)")
    .option("--resume", "continue from the newest checkpoint in the config's output_dir")
    .option("--force", "with --resume: continue although the config differs from the one the checkpoints were trained with (the old one is kept as config.step-N.json, the change logged)")
    .option("--backend <name>", "tfjs backend: auto, webgpu, tensorflow, wasm or cpu (overrides the config)")
    .option("--max-seconds <s>", "wall-clock budget: finish and checkpoint the step running when it passes, then stop (resume later with --resume)", numberOption("--max-seconds", { min: 0 }))
    .option("--plan", "print the memory plan (weights, KV cache, activations per micro-batch, optimizer state, peak against the device) and exit")
    .option("--quiet", "no per-step progress lines")
    .option("--json", "print the run summary as JSON at the end")
    .action(async (flags: TrainFlags) => {
      const cfg = readConfig(flags.config, mode);
      if (cfg.band && !existsSync(cfg.band.rows)) throw missingBandRows(flags.config, cfg.band, cfg.tasks);
      const note = (m: string) => {
        if (!flags.quiet) process.stderr.write(`${m}\n`);
      };
      // checkpoints are written whole (temp folder + rename): a stop keeps the newest, and --resume goes on from it
      const interrupted = flags.plan ? () => undefined : onInterrupt(() => {
        const last = latestCheckpoint(cfg.output_dir);
        const resume = commandLine(["--resume"]);
        return last
          ? `${cfg.output_dir} keeps the checkpoint after step ${checkpointStep(last)} (the steps after it run again); continue with: ${resume}`
          : `no checkpoint in ${cfg.output_dir} yet (one is written every ${cfg.checkpoint_every} step(s)), so the run starts over with: ${resume}`;
      });
      const summary = await runTraining(cfg, {
        resume: flags.resume,
        force: flags.force,
        backend: flags.backend,
        maxSeconds: flags.maxSeconds,
        planOnly: flags.plan,
        onNote: flags.plan ? (m) => process.stdout.write(`${m}\n`) : note,
        onWarning: (m) => process.stderr.write(`warning: ${m}\n`),
        onStep: (r) => note(stepLine(mode, r, mode === "grpo" ? cfg.steps : Number(r.total_steps))),
      }).finally(interrupted);
      if (flags.json) printJson(summary);
      else if (summary.planned) return;
      else if (summary.stopped_early) process.stdout.write(`stopped by --max-seconds after ${summary.resumed_from + summary.steps_done} of ${summary.steps} steps (continue with --resume); log: ${summary.output_dir}/train_log.jsonl; result: ${summary.final ?? "-"}\n`);
      else process.stdout.write(`trained ${summary.steps} steps on ${summary.conversations !== undefined ? `${summary.conversations} conversations` : `${summary.tasks} tasks`} (${summary.backend}); log: ${summary.output_dir}/train_log.jsonl; result: ${summary.final ?? "-"}\n`);
    });
}

/** The error for a config whose band rows file is missing: what that file is and what makes it. */
function missingBandRows(config: string, band: { rows: string; lo: number; hi: number }, tasks: string): T2sError {
  return new T2sError(
    "no_band_rows",
    `${band.rows} does not exist: it is the band rows of ${config} (band.rows), the base model's rollouts on the train split from which ` +
      `the training band (pass rate in [${band.lo}, ${band.hi}]) is chosen. Notebook 02-headroom writes it (t2s notebooks run 02-headroom), ` +
      `or run: t2s benchmark --policy <base model> --tasks ${tasks} --split train --k 8 --out ${band.rows}`,
  );
}

export function registerTrain(program: Command): void {
  const train = program.command("train").description("fine-tune the in-process model: supervised (sft) or with GRPO against the verifier reward (grpo)");
  addMode(train, "sft", "supervised fine-tuning on the tasks' gold queries, rendered as the episode's reply (prompt tokens masked)");
  addMode(train, "grpo", "GRPO: sample groups of episodes per task, grade them with the verifier, update the policy");
}
