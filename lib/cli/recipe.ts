/** `t2s recipe default-model` / `tool-data` / `export`: the kit's own models, from tokenizer to exported folder. */
import type { Command } from "commander";
import { join, resolve } from "node:path";
import { kitPath } from "../core/paths.js";
import { existsSync } from "node:fs";
import { withExecutor } from "../db/pool.js";
import { writeJsonlAtomic } from "../core/jsonl.js";
import { checkpointSteps, defaultRecipe, exportModel, runRecipe, trainOnlyTasks } from "../recipes/default-model.js";
import { buildToolTranscripts, type ToolDataPadding } from "../recipes/tool-data.js";
import { loadTokenizer } from "../model/tokenizer.js";
import { promptIds } from "../model/chat-prompt.js";
import { UsageError } from "../core/errors.js";
import { intOption, numberOption, outFile, printJson } from "./options.js";

interface RecipeFlags {
  tasks: string;
  work: string;
  out?: string;
  step?: number;
  seed: number;
  steps?: number;
  batchSize?: number;
  lr?: number;
  checkpointEvery?: number;
  hidden?: number;
  layers?: number;
  heads?: number;
  kvHeads?: number;
  intermediate?: number;
  vocab?: number;
  maxPositions?: number;
  backend?: string;
  maxSeconds?: number;
  initOnly?: boolean;
  resume?: boolean;
  initWeights?: string;
  extraTasks?: string;
  stopAt?: number;
  warmup?: number;
  microBatchRows?: number;
  json?: boolean;
  quiet?: boolean;
}

export function registerRecipe(program: Command): void {
  const recipe = program.command("recipe").description("recipes that build the kit's own models from scratch");
  recipe
    .command("default-model")
    .description("train the default model: BPE tokenizer (train split + system prompt), random Qwen2 init, full-weight SFT; --out exports a checkpoint")
    .option("--tasks <file>", "task file (only its train split is read)", kitPath("data/shop/tasks.jsonl"))
    .option("--work <dir>", "working folder: init/, sft.json, sft/checkpoints/", "runs/default-model")
    .option("--out <dir>", "after training, export the checkpoint of --step (default: the last) to this model folder (float16)")
    .option("--step <n>", "checkpoint step to export with --out", intOption("--step", 1))
    .option("--seed <n>", "seed of the weights init, the data order and the sampler", intOption("--seed", 0), 1)
    .option("--steps <n>", "SFT optimizer steps (default 600)", intOption("--steps", 1))
    .option("--batch-size <n>", "SFT examples per step (default 32)", intOption("--batch-size", 1))
    .option("--lr <x>", "peak learning rate (default 2e-3, 30 warm-up steps, cosine to 10%)", numberOption("--lr", { gt: 0 }))
    .option("--checkpoint-every <n>", "checkpoint every N steps (default 100)", intOption("--checkpoint-every", 0))
    .option("--hidden <n>", "hidden size (default 256)", intOption("--hidden", 8))
    .option("--layers <n>", "decoder layers (default 4)", intOption("--layers", 1))
    .option("--heads <n>", "attention heads (default 4)", intOption("--heads", 1))
    .option("--kv-heads <n>", "key/value heads (default 2)", intOption("--kv-heads", 1))
    .option("--intermediate <n>", "MLP width (default 704)", intOption("--intermediate", 1))
    .option("--vocab <n>", "tokenizer vocabulary size (default 4096)", intOption("--vocab", 300))
    .option("--max-positions <n>", "context length: max_position_embeddings and the tokenizer's model_max_length (default 2048)", intOption("--max-positions", 64))
    .option("--backend <name>", "tfjs backend for training: webgpu, wasm, cpu (default: auto)")
    .option("--stop-at <n>", "stop once N steps are done (checkpoint N kept; the schedule still spans --steps)", intOption("--stop-at", 1))
    .option("--max-seconds <s>", "stop training after this many seconds, keeping the checkpoints written", numberOption("--max-seconds", { min: 0 }))
    .option("--init-weights <file>", "start SFT from these weights (model.safetensors of the same shape) instead of the random init")
    .option("--extra-tasks <file>", "extra train-only tasks for SFT (e.g. from `t2s tasks augment`), read after the train split; not in the tokenizer corpus; any holdout task, id or gold SQL is an error")
    .option("--warmup <n>", "learning-rate warm-up steps (default 30)", intOption("--warmup", 0))
    .option("--micro-batch-rows <n>", "rows per forward/backward pass (default 16); rows of one pass share the system prompt's computation", intOption("--micro-batch-rows", 1))
    .option("--init-only", "write the tokenizer and the random init only (no training)")
    .option("--resume", "continue the SFT run of --work from its last checkpoint (same settings; one cut by --max-seconds or --stop-at)")
    .option("--json", "print the summary as JSON")
    .option("--quiet", "no per-step lines")
    .action(async (f: RecipeFlags) => {
      const o = defaultRecipe(resolve(f.tasks), resolve(f.work));
      o.seed = f.seed;
      if (f.steps !== undefined) o.sft.steps = f.steps;
      if (f.batchSize !== undefined) o.sft.batch_size = f.batchSize;
      if (f.lr !== undefined) o.sft.lr = f.lr;
      if (f.checkpointEvery !== undefined) o.sft.checkpoint_every = f.checkpointEvery;
      if (f.hidden !== undefined) o.shape.hiddenSize = f.hidden;
      if (f.layers !== undefined) o.shape.numLayers = f.layers;
      if (f.heads !== undefined) o.shape.numHeads = f.heads;
      if (f.kvHeads !== undefined) o.shape.numKvHeads = f.kvHeads;
      if (f.intermediate !== undefined) o.shape.intermediateSize = f.intermediate;
      if (f.vocab !== undefined) o.vocabSize = f.vocab;
      if (f.maxPositions !== undefined) o.shape.maxPositions = f.maxPositions;
      if (f.warmup !== undefined) o.sft.warmup_steps = f.warmup;
      if (f.microBatchRows !== undefined) o.sft.micro_batch_rows = f.microBatchRows;
      if (f.initWeights) o.initWeights = resolve(f.initWeights);
      if (f.extraTasks) o.extraTasks = resolve(f.extraTasks);
      o.sft.warmup_steps = Math.min(o.sft.warmup_steps, Math.max(0, o.sft.steps - 1));
      o.backend = f.backend;
      o.maxSeconds = f.maxSeconds;
      o.stopAt = f.stopAt;
      o.initOnly = f.initOnly;
      o.resume = f.resume;
      o.onNote = (m) => process.stderr.write(`${m}\n`);
      if (!f.quiet) o.onStep = (r) => process.stderr.write(`step ${r.step}/${r.total_steps} loss ${Number(r.loss).toFixed(4)} lr ${Number(r.lr).toExponential(2)} ${Number(r.tokens_per_s).toFixed(0)} tok/s\n`);
      const t0 = Date.now();
      const res = await runRecipe(o);
      const steps = checkpointSteps(o.work);
      let exported: string | null = null;
      if (f.out && !o.initOnly) {
        const step = f.step ?? steps[steps.length - 1];
        if (step === undefined || !steps.includes(step)) throw new UsageError(`no checkpoint for step ${step ?? "(none)"} in ${o.work}; have ${steps.join(", ") || "none"}`);
        exported = exportStep(o.work, step, resolve(f.out), o.seed);
      }
      const summary = { work: o.work, parameters: res.parameters, checkpoints: steps, stopped_early: res.stoppedEarly, seconds: (Date.now() - t0) / 1000, exported, last: res.summary?.last ?? null };
      if (f.json) printJson(summary);
      else process.stdout.write(`parameters ${res.parameters}; checkpoints ${steps.join(", ") || "none"}${exported ? `; exported ${exported}` : ""}\n`);
    });
  recipe
    .command("tool-data")
    .description("write tool-use SFT conversations: per train task an episode that probes the live database with the SQL tool, then commits the gold query (native and hermes formats, plus single-style turns)")
    .option("--tasks <file>", "task file (only its train split is read)", kitPath("data/shop/tasks.jsonl"))
    .option("--extra-tasks <file>", "extra train-only tasks (e.g. from `t2s tasks augment`); any holdout task, id or gold SQL is an error")
    .requiredOption("--out <file>", "conversations file to write (JSONL of {messages, tools?}; `conversations` of an SFT config)", outFile("--out", "conversations.jsonl"))
    .option("--seed <n>", "seed of every choice (plan, probe, format, style)", intOption("--seed", 0), 0)
    .option("--single-share <x>", "share of single-style conversations (no tool)", numberOption("--single-share", { min: 0, max: 1 }), 0.2)
    .option("--hermes-share <x>", "share of hermes-text tool calls among tool-style conversations (the rest native)", numberOption("--hermes-share", { min: 0, max: 1 }), 0.5)
    .option("--pad-share <x>", "share of single-style conversations whose opening is padded with tool turns that cannot help (trained as context)", numberOption("--pad-share", { min: 0, max: 1 }), 0)
    .option("--pad-max <n>", "a padded opening's length is drawn between the bare prompt and this many prompt tokens", intOption("--pad-max", 1), 2000)
    .option("--tokenizer <dir>", "model folder whose chat template and tokenizer count the padding's tokens (the recipe's tokenizer)", kitPath("data/models/shop-sql-4m"))
    .option("--force", "overwrite --out if it exists")
    .option("--json", "print the summary as JSON")
    .action(async (f: { tasks: string; extraTasks?: string; out: string; seed: number; singleShare: number; hermesShare: number; padShare: number; padMax: number; tokenizer: string; force?: boolean; json?: boolean }) => {
      const out = resolve(f.out);
      if (existsSync(out) && !f.force) throw new UsageError(`${f.out} exists; pass --force to overwrite it`);
      let padding: ToolDataPadding | undefined;
      if (f.padShare > 0) {
        const tok = loadTokenizer(resolve(f.tokenizer));
        padding = { share: f.padShare, maxTokens: f.padMax, countTokens: async (m) => promptIds(tok, m).length };
      }
      const { train, extra } = trainOnlyTasks(resolve(f.tasks), f.extraTasks ? resolve(f.extraTasks) : undefined);
      const t0 = Date.now();
      const tty = process.stderr.isTTY;
      const r = await withExecutor((executor) => buildToolTranscripts([...train, ...extra], {
        executor, seed: f.seed, singleShare: f.singleShare, hermesShare: f.hermesShare, padding,
        onProgress: (done, total) => {
          if (done % 500 === 0 || done === total) process.stderr.write(`${tty ? "\r" : ""}tool-data ${done}/${total}${tty && done < total ? "" : "\n"}`);
        },
      }));
      writeJsonlAtomic(out, r.transcripts);
      const summary = { out, tasks: train.length + extra.length, conversations: r.transcripts.length, by_plan: tally(r.transcripts, (t) => t.plan), by_protocol: tally(r.transcripts, (t) => t.protocol ?? "single"), padded: r.transcripts.filter((t) => t.padding_calls !== undefined).length, dropped: r.dropped, seconds: (Date.now() - t0) / 1000 };
      if (f.json) printJson(summary);
      else process.stdout.write(`${summary.conversations} conversations from ${summary.tasks} tasks -> ${out}\nplans ${JSON.stringify(summary.by_plan)}; formats ${JSON.stringify(summary.by_protocol)}${summary.padded ? `; ${summary.padded} padded openings` : ""}${Object.keys(r.dropped).length ? `; dropped ${JSON.stringify(r.dropped)}` : ""}\n`);
    });
  recipe
    .command("export")
    .description("write a model folder (float16) from a default-model run's checkpoint")
    .requiredOption("--work <dir>", "the working folder of `t2s recipe default-model`")
    .requiredOption("--step <n>", "checkpoint step", intOption("--step", 1))
    .requiredOption("--out <dir>", "model folder to write")
    .option("--seed <n>", "recorded in the weights' metadata", intOption("--seed", 0), 1)
    .action((f: { work: string; step: number; out: string; seed: number }) => {
      const steps = checkpointSteps(resolve(f.work));
      if (!steps.includes(f.step)) throw new UsageError(`no checkpoint for step ${f.step} in ${f.work}; have ${steps.join(", ") || "none"}`);
      process.stdout.write(`${exportStep(resolve(f.work), f.step, resolve(f.out), f.seed)}\n`);
    });
}

function exportStep(work: string, step: number, out: string, seed: number): string {
  const ckpt = join(work, "sft", "checkpoints", `step-${String(step).padStart(6, "0")}`);
  return exportModel(join(work, "init"), join(ckpt, "model.safetensors"), out, "F16", { sft_step: String(step), seed: String(seed) });
}

/** How many items fall under each key. */
function tally<T>(items: T[], key: (x: T) => string): Record<string, number> {
  const out: Record<string, number> = {};
  for (const x of items) out[key(x)] = (out[key(x)] ?? 0) + 1;
  return out;
}
