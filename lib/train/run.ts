/**
 * A training run from a validated config: load the model on the chosen backend, attach the adapter,
 * choose the tasks (split, band, limit), build the real environment (prompts, read-only SQL tool,
 * verifier grading) and run SFT or GRPO with checkpoints in output_dir. Used by `t2s train` (notebooks start the CLI).
 */
import { applyQuantization } from "../model/quantization.js";
import { applyKvCacheDtype } from "../model/engine/runners.js";
import { commonPrefix } from "../model/prefix.js";
import { cpSync, existsSync, mkdirSync, readFileSync, statSync } from "node:fs";
import { join } from "node:path";
import { ExecutorPool } from "../db/pool.js";
import type { Executor } from "../db/types.js";
import { T2sError } from "../core/errors.js";
import { promptTemplateHash, type PromptConfig } from "../episode/prompt.js";
import { sqlToolSpec } from "../episode/tools.js";
import { promptIds, renderChat } from "../model/chat-prompt.js";
import { assertTokenizerFile, describeLoad, loadModel } from "../model/load.js";
import { freeIdleRunners } from "../model/engine/runners.js";
import { poolBudgetBytes, trimGpuBufferPool } from "../backend/gpu-pool.js";
import { assertPlanFits, formatPlan, poolRoom } from "./memory-plan.js";
import { planRun } from "./run-plan.js";
import { attachAdapter, createAdapter, inspectAdapter } from "../model/lora.js";
import type { CausalLM } from "../model/model.js";
import { defaultEnv } from "../runs/env.js";
import { runRollout } from "../runs/rollout.js";
import { readTasks } from "../tasks/io.js";
import type { Task } from "../tasks/types.js";
import { selectRunTasks, selectTasks, writeRunTasks } from "../tasks/select.js";
import { checkpointStep, latestCheckpoint, removeTempCheckpoints } from "./checkpoint.js";
import { appendTrainLog } from "./core.js";
import { takeLock } from "../runs/lock.js";
import { writeFileAtomic } from "../core/files.js";
import { configChanges, type TrainConfig } from "./config.js";
import { conversationExample, readConversations } from "./conversations.js";
import { episodeGrader, episodeSampler, ModelPolicy } from "./episode-sampler.js";
import { GrpoTrainer } from "./grpo.js";
import { ModelTrainable } from "./trainable-model.js";
import type { TokenRow } from "./batching.js";
import { SftTrainer } from "./sft.js";

export const ADAPTER_NAME = "train";
/** The lock file in output_dir naming the trainer that writes there. */
export const TRAIN_LOCK = "train.lock";

export interface RunHooks {
  /** Continue from the newest checkpoint in output_dir. */
  resume?: boolean;
  /** Resume even though the config differs from the one the checkpoints were trained with (the change is logged). */
  force?: boolean;
  /** Backend override (else the config's, else T2S_BACKEND / auto). */
  backend?: string;
  onStep?: (record: Record<string, unknown>) => void;
  onWarning?: (message: string) => void;
  /** One-line notes on what the run is doing (model loaded, tasks chosen, ...). */
  onNote?: (message: string) => void;
  /** Wall-clock budget in seconds, counted from the first step: stop (with a checkpoint) after the step that passes it. */
  maxSeconds?: number;
  /** Print the memory plan and stop before training (`t2s train --plan`). */
  planOnly?: boolean;
}

export interface RunSummary {
  mode: "sft" | "grpo";
  output_dir: string;
  steps: number;
  resumed_from: number;
  tasks: number;
  /** Conversations trained on (SFT from a conversations file). */
  conversations?: number;
  backend: string;
  /** Set when the run only printed its memory plan (--plan). */
  planned?: boolean;
  /** The final trainable weights: a PEFT adapter folder, or a checkpoint folder for full training. */
  final: string | null;
  /** Steps this run did (after the resumed ones). */
  steps_done: number;
  /** Whether the wall-clock budget (maxSeconds) ended the run before `steps`. */
  stopped_early: boolean;
  last: Record<string, unknown> | null;
}

/** The tasks a run trains on, out of all tasks of its file: split, then band, then `limit` (as `t2s benchmark` selects them). */
export function chooseTasks(cfg: TrainConfig, all: Task[]): Task[] {
  const tasks = selectRunTasks(all, cfg);
  if (tasks.length === 0) {
    throw new T2sError("no_tasks", `no tasks left to train on in ${cfg.tasks} (split '${cfg.split}'${cfg.band ? `, band [${cfg.band.lo}, ${cfg.band.hi}] of ${cfg.band.rows}` : ""})`);
  }
  return tasks;
}

function promptConfig(cfg: TrainConfig): PromptConfig {
  return { style: cfg.episode.style, protocol: cfg.episode.protocol, maxToolCalls: cfg.episode.max_tool_calls, toolRows: cfg.episode.tool_rows };
}

async function prepareModel(cfg: TrainConfig, hooks: RunHooks): Promise<{ model: CausalLM; lm: ModelTrainable }> {
  assertTokenizerFile(cfg.model);
  // full training keeps float32 master weights, so its base is loaded float32
  const model = await loadModel(cfg.model, { backend: hooks.backend ?? cfg.backend ?? undefined, weightsDtype: cfg.adapter ? cfg.weights_dtype : "fp32" });
  hooks.onNote?.(describeLoad(model));
  // the sampler's precision; the learner's own passes ignore it
  if (cfg.mode === "grpo") {
    applyQuantization(model, cfg.sampling.quantization);
    applyKvCacheDtype(model, cfg.sampling.kv_cache_dtype);
  }
  if (cfg.adapter) {
    if (cfg.adapter.init) attachAdapter(model, cfg.adapter.init, { name: ADAPTER_NAME, trainable: true, allowBaseMismatch: cfg.adapter.allow_base_mismatch });
    else createAdapter(model, { name: ADAPTER_NAME, r: cfg.adapter.r, alpha: cfg.adapter.alpha, targetModules: cfg.adapter.targets, seed: cfg.seed, useRslora: cfg.adapter.use_rslora });
    // a checkpoint to resume records the base it was trained on: the same folder may hold another model now
    const last = hooks.resume ? latestCheckpoint(cfg.output_dir) : null;
    if (last && existsSync(join(last, "adapter_config.json"))) inspectAdapter(model, last, { allowBaseMismatch: cfg.adapter.allow_base_mismatch });
  }
  return { model, lm: new ModelTrainable(model, cfg.adapter ? ADAPTER_NAME : null, { maxActivationElements: cfg.max_tensor_elements, logitChunkTokens: cfg.logit_chunk_tokens }) };
}

/** What a resume with a changed config (under --force) must record once the trainer has resumed. */
interface ConfigChange {
  atStep: number;
  changed: string[];
  previous: string;
}

/**
 * Refuses to start over a run's checkpoints without --resume, and to resume them with a config that
 * changes how the steps already taken were trained (lr, seed, sampling, ...) unless `force`: then the
 * old config is kept as config.step-N.json beside the new config.json and the change is returned so the
 * log records it. Writes config.json.
 */
function guardOutput(cfg: TrainConfig, resume: boolean, force: boolean): ConfigChange | null {
  const last = latestCheckpoint(cfg.output_dir);
  if (!resume && last) {
    throw new T2sError("output_exists", `${cfg.output_dir} already holds checkpoints; pass --resume to continue that run, or choose a new output_dir`);
  }
  const configPath = join(cfg.output_dir, "config.json");
  let change: ConfigChange | null = null;
  if (resume && last && existsSync(configPath)) {
    let before: Record<string, unknown>;
    try {
      before = JSON.parse(readFileSync(configPath, "utf8")) as Record<string, unknown>;
    } catch (e) {
      throw new T2sError("bad_config", `${configPath}: not valid JSON (${(e as Error).message}); it records the config the checkpoints were trained with`);
    }
    const changed = configChanges(before, cfg);
    if (changed.length) {
      const atStep = checkpointStep(last);
      const previous = `config.step-${atStep}.json`;
      if (!force) {
        throw new T2sError(
          "config_changed",
          `${cfg.output_dir} was trained to step ${atStep} with another config (${changed.join("; ")}). Resume with the config in ${configPath}, ` +
            `or pass --force to continue with the new one (the old one is kept as ${previous} and the change is logged).`,
        );
      }
      cpSync(configPath, join(cfg.output_dir, previous));
      change = { atStep, changed, previous };
    }
  }
  writeFileAtomic(configPath, JSON.stringify(cfg, null, 2) + "\n");
  return change;
}

/**
 * Creates output_dir and takes its lock (`train.lock`), so a second trainer on the same folder is refused
 * instead of interleaving its log and checkpoints with this one's; then removes what killed runs left
 * there (temporary checkpoint folders, `.tmp-PID` files). Returns the release function.
 */
function claimOutput(dir: string): () => void {
  if (existsSync(dir) && !statSync(dir).isDirectory()) {
    throw new T2sError("bad_config", `output_dir ${dir} is an existing file, not a folder; choose another output_dir`);
  }
  try {
    mkdirSync(dir, { recursive: true });
  } catch (e) {
    throw new T2sError("bad_config", `cannot create output_dir ${dir}: ${(e as Error).message}`);
  }
  const release = takeLock(join(dir, TRAIN_LOCK), `output_dir ${dir} (another training run)`);
  removeTempCheckpoints(dir);
  return release;
}

/** SFT examples from tasks' gold queries, rendered as the reply the episode prompt asks for; prompt tokens masked. */
export function sftExamples(model: CausalLM, tasks: Task[], cfg: TrainConfig, opening: (t: Task) => ReturnType<ReturnType<typeof defaultEnv>["opening"]>): Promise<TokenRow[]> {
  const policy = new ModelPolicy(model, { adapter: null });
  const tok = model.requireTokenizer();
  const tools = cfg.episode.style === "tool" && cfg.episode.protocol === "native" ? [sqlToolSpec()] : undefined;
  return Promise.all(
    tasks.map(async (t) => {
      const messages = await opening(t);
      const prompt = policy.promptIds(messages, tools);
      const reply = "```sql\n" + t.gold_sql.trim() + "\n```";
      const text = renderChat(tok, [...messages, { role: "assistant", content: reply }], { tools, addGenerationPrompt: false });
      const ids = tok.encode(text, { addSpecialTokens: false });
      // the completion starts where the rendered conversation stops matching the prompt
      const k = commonPrefix([prompt, ids]);
      return { ids, mask: ids.map((_, i) => (i >= k ? 1 : 0)) };
    }),
  );
}

const noExecutor: Executor = {
  execute: () => Promise.reject(new T2sError("internal", "SFT does not run SQL")),
  close: async () => undefined,
};

/** Runs the training a config describes; returns where the result went and the last step's record. */
export async function runTraining(cfg: TrainConfig, hooks: RunHooks = {}): Promise<RunSummary> {
  const fromConversations = cfg.mode === "sft" && cfg.conversations !== null;
  const allTasks = fromConversations ? [] : readTasks(cfg.tasks);
  const tasks = fromConversations ? [] : chooseTasks(cfg, allTasks);
  const conversations = fromConversations ? readConversations(cfg.conversations!) : [];
  const input = { allTasks, tasks, conversations, fromConversations };
  // --plan writes nothing: the output folder is neither locked nor claimed
  if (hooks.planOnly) return trainClaimed(cfg, hooks, input);
  const release = claimOutput(cfg.output_dir);
  try {
    return await trainClaimed(cfg, hooks, input);
  } finally {
    release();
  }
}

async function trainClaimed(cfg: TrainConfig, hooks: RunHooks, input: { allTasks: Task[]; tasks: Task[]; conversations: ReturnType<typeof readConversations>; fromConversations: boolean }): Promise<RunSummary> {
  const { allTasks, tasks, conversations, fromConversations } = input;
  const change = hooks.planOnly ? null : guardOutput(cfg, hooks.resume ?? false, hooks.force ?? false);
  const { model, lm } = await prepareModel(cfg, hooks);
  hooks.onNote?.(`${fromConversations ? `${conversations.length} conversations` : `${tasks.length} tasks`}; ${lm.trainableParams().length} trainable tensors (${cfg.adapter ? `LoRA r=${cfg.adapter.r} on ${cfg.adapter.targets.join(",")}` : "all weights"})`);
  const prompt = promptConfig(cfg);
  const tools = cfg.episode.style === "tool" && cfg.episode.protocol === "native" ? [sqlToolSpec()] : undefined;
  const planEnv = defaultEnv({ executor: noExecutor, prompt });
  const tok = model.requireTokenizer();
  const examples = cfg.mode === "sft" ? (fromConversations ? conversations.map((c) => conversationExample(tok, c)) : await sftExamples(model, tasks, cfg, (t) => planEnv.opening(t))) : [];
  const planned = await planRun(cfg, model, lm, {
    openings: cfg.mode === "grpo" ? await Promise.all(tasks.slice(0, 64).map((t) => planEnv.opening(t))) : undefined,
    promptIds: (m) => promptIds(tok, m, tools),
    sftRows: examples,
  });
  for (const line of formatPlan(planned.plan).split("\n")) hooks.onNote?.(line);
  if (hooks.planOnly) {
    lm.dispose();
    model.dispose();
    return { mode: cfg.mode, output_dir: cfg.output_dir, steps: 0, resumed_from: 0, tasks: tasks.length, backend: model.backend, final: null, steps_done: 0, stopped_early: false, last: null, planned: true };
  }
  assertPlanFits(planned.plan, planned.input);
  // which tasks this run trains on, for the serving check to score the same ones (lib/report/serving.ts)
  if (!fromConversations) writeRunTasks(cfg.output_dir, cfg.tasks, cfg, tasks);
  lm.recompute = planned.plan.recompute;
  const common = {
    lr: cfg.lr, schedule: cfg.schedule, warmupSteps: cfg.warmup_steps, minLrRatio: cfg.min_lr_ratio, weightDecay: cfg.weight_decay, maxGradNorm: cfg.max_grad_norm,
    outDir: cfg.output_dir, checkpointEvery: cfg.checkpoint_every, keepCheckpoints: cfg.keep_checkpoints, onStep: hooks.onStep, onWarning: hooks.onWarning, checkpointFiles: () => lm.checkpointFiles(), maxSeconds: hooks.maxSeconds,
    poolBudgetBytes: poolRoom(planned.plan, poolBudgetBytes()),
    maxTensorElements: cfg.max_tensor_elements, maxMicroBatchRows: planned.microBatchRows, seed: cfg.seed,
  };
  let executor: ExecutorPool | null = null;
  let sampler: ModelPolicy | null = null;
  try {
    let trainer: GrpoTrainer<Task> | SftTrainer;
    if (cfg.mode === "sft") {
      trainer = new SftTrainer(lm, examples, { ...common, batchSize: cfg.batch_size, epochs: cfg.epochs, steps: cfg.steps || undefined });
    } else {
      executor = new ExecutorPool({});
      const env = defaultEnv({ executor, prompt, preset: cfg.reward_preset });
      const episode = { style: cfg.episode.style, protocol: cfg.episode.protocol, maxToolCalls: cfg.episode.max_tool_calls, maxContextTokens: cfg.episode.max_context_tokens, toolOutput: { maxRows: cfg.episode.tool_rows }, endOnUnsafeTool: cfg.reward_preset === "tool-rl" };
      const policy = new ModelPolicy(model, { adapter: cfg.adapter ? ADAPTER_NAME : null, maxBatch: cfg.sampling.max_batch, maxLength: planned.samplerLength, prefixCaching: cfg.sampling.prefix_caching });
      sampler = policy;
      const ev = cfg.eval;
      const evalTasks = ev ? selectTasks(allTasks, ev.split, ev.limit) : [];
      const onEval = ev && evalTasks.length
        ? async (step: number) => {
            policy.weightsChanged();
            const r = await runRollout(evalTasks, policy, env, {
              out: join(cfg.output_dir, "eval.jsonl"), k: ev.samples, evalRun: `step-${step}`, seed: cfg.seed, promptHash: promptTemplateHash(prompt),
              episode: { ...episode, sampling: { temperature: cfg.sampling.temperature, top_p: cfg.sampling.top_p, max_tokens: cfg.sampling.max_tokens } },
              concurrency: evalTasks.length * ev.samples,
            });
            const n = Math.max(1, r.rows.length);
            return { pass1: r.rows.filter((x) => x.correct).length / n, reward: r.rows.reduce((a, x) => a + (x.reward ?? 0), 0) / n, rows: r.rows.length };
          }
        : undefined;
      const sample = episodeSampler({ policy, env, episode, sampling: cfg.sampling });
      // when the plan needs the room, the sampler's cache and pooled buffers go before each update
      const release = planned.plan.releaseSampler;
      if (release) hooks.onNote?.("the sampler's KV cache is freed before each update (memory plan)");
      const sampleThenRelease: typeof sample = async (...args) => {
        const out = await sample(...args);
        if (release) {
          await policy.close();
          freeIdleRunners(model);
          // the sampler's sizes are not asked for again before the next step: empty the pool
          trimGpuBufferPool(0);
        }
        return out;
      };
      trainer = new GrpoTrainer(lm, tasks, sampleThenRelease, episodeGrader({ minToolCalls: cfg.episode.min_tool_calls }), {
        ...common, steps: cfg.steps, promptsPerStep: cfg.prompts_per_step, groupSize: cfg.group_size, lossType: cfg.loss_type, epsilonLow: cfg.epsilon_low,
        epsilonHigh: cfg.epsilon_high, beta: cfg.beta, scale: cfg.scale_rewards, mu: cfg.mu, maskTruncated: cfg.mask_truncated,
        temperature: cfg.sampling.temperature, maxCompletionLength: cfg.sampling.max_tokens, evalEvery: ev?.every, onEval,
        importanceSamplingCorrection: cfg.vllm_importance_sampling_correction, importanceSamplingMode: cfg.vllm_importance_sampling_mode, importanceSamplingCap: cfg.vllm_importance_sampling_cap,
      });
    }
    // without --resume there is no checkpoint (guardOutput): resume() then only drops the step records a
    // run killed before its first checkpoint left in train_log.jsonl, since those steps are redone
    const resumedFrom = trainer.resume();
    if (hooks.resume) hooks.onNote?.(resumedFrom ? `resuming after step ${resumedFrom}` : "no checkpoint to resume from; starting at step 0");
    if (change) {
      // after resume(), which rewrites the log up to the checkpoint, so the record lands in order
      appendTrainLog(join(cfg.output_dir, "train_log.jsonl"), { event: "config_changed", at_step: change.atStep, changed: change.changed, previous_config: change.previous, time: new Date().toISOString() });
      hooks.onWarning?.(`resuming at step ${change.atStep} with a changed config (${change.changed.join("; ")}); the old one is kept as ${change.previous}`);
    }
    const records = await trainer.train();
    const total = trainer instanceof SftTrainer ? trainer.totalSteps : cfg.steps;
    const last = latestCheckpoint(cfg.output_dir);
    let final: string | null = last;
    if (last && cfg.adapter) {
      final = join(cfg.output_dir, "adapter");
      for (const f of ["adapter_model.safetensors", "adapter_config.json"]) {
        mkdirSync(final, { recursive: true });
        cpSync(join(last, f), join(final, f));
      }
    }
    trainer.dispose();
    return {
      mode: cfg.mode, output_dir: cfg.output_dir, steps: total, resumed_from: resumedFrom, tasks: tasks.length, ...(fromConversations ? { conversations: conversations.length } : {}), backend: model.backend, final,
      steps_done: records.length, stopped_early: resumedFrom + records.length < total, last: records[records.length - 1] ?? null,
    };
  } finally {
    await sampler?.close();
    await executor?.close();
    lm.dispose();
    model.dispose();
  }
}
