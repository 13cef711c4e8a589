/**
 * `benchmark()`: the whole rollout from a policy spec and a task file to rows, a pass@k summary and the
 * failure breakdown. Used by `t2s benchmark` (notebooks start the CLI); re-running with the same arguments resumes.
 */
import type { QuantizationName } from "../model/quantization.js";
import type { KvCacheDtypeName } from "../model/kv-cache-dtype.js";
import { resolve } from "node:path";
import { ExecutorPool } from "../db/pool.js";
import type { Executor } from "../db/types.js";
import { T2sError, UsageError } from "../core/errors.js";
import { promptTemplateHash, type EpisodeStyle, type PromptConfig, type ToolProtocol } from "../episode/prompt.js";
import { loadPolicy } from "../policy/spec.js";
import type { Policy, Sampling } from "../policy/types.js";
import { summarize, type Summary } from "../stats/summary.js";
import { describeMissing, loadTaskSource } from "../tasks/loaders.js";
import type { Task } from "../tasks/types.js";
import type { RewardPreset } from "../verifier/types.js";
import { defaultEnv, paddedEnv } from "./env.js";
import { rolloutFacts, type RolloutFacts } from "./facts.js";
import { sampleTasks, selectTasks, type BandSpec } from "../tasks/select.js";
import { databaseHashes, tasksHash, type RunGrading } from "./meta.js";
import type { ProgressSnapshot } from "./progress.js";
import { runRollout, type RolloutEnv, type RolloutResult } from "./rollout.js";
import { CONCURRENCY, MAX_TOKENS_PER_TURN, SAMPLES_PER_TASK, SAMPLING_TEMPERATURE, TOOL_CHARS, TOOL_ROWS } from "../core/defaults.js";

export interface BenchmarkOptions {
  /** A policy spec ("openai:<model>@<url>", "scripted:<file>", ...) or a Policy. */
  policy: string | Policy;
  /** tfjs:<model>+<adapter>: load an adapter recorded as trained on another base (default refused). */
  allowBaseMismatch?: boolean;
  /** A task file or folder (kit jsonl, Spider or BIRD folder, BIRD-Platinum file) or the tasks themselves. */
  tasks: string | Task[];
  /** A task whose database is missing stops the run (default: it is skipped and listed on the progress stream). */
  strict?: boolean;
  /** Grading: row cap of gold and candidate (default: the dialect's), dialect (default: each task's own),
   * DISTINCT rule (default keep). Recorded in the run's metadata. */
  grading?: RunGrading;
  split?: "train" | "holdout";
  /** Only tasks whose pass rate in an earlier rows file lies in [lo, hi] (a training band), after the split. */
  band?: BandSpec;
  /** Only the first N tasks (after the split and band filters), in file order. */
  limit?: number;
  /** Only n tasks drawn at random with seed (after the split, band and limit), in file order (tasks/select.ts sampleTasks). */
  sample?: { n: number; seed: number };
  /** Samples per task (default SAMPLES_PER_TASK). */
  k?: number;
  out: string;
  style?: EpisodeStyle;
  protocol?: ToolProtocol;
  /** How replies are sampled (temperature default SAMPLING_TEMPERATURE, max_tokens MAX_TOKENS_PER_TURN; top_p: the server's). */
  sampling?: Pick<Sampling, "temperature" | "top_p" | "max_tokens">;
  maxToolCalls?: number;
  maxContextTokens?: number;
  /** Pad each single-style opening with unhelpful tool turns up to this many prompt tokens (lib/episode/padding.ts). */
  padContext?: number;
  /** Seed of the padding queries (default 0). */
  padSeed?: number;
  toolRows?: number;
  toolChars?: number;
  toolTruncate?: "middle" | "rows";
  toolTimeoutMs?: number;
  /** Episodes (and requests) in flight (default 8). */
  concurrency?: number;
  seed?: number;
  evalRun?: string;
  force?: boolean;
  preset?: RewardPreset;
  /** Wait up to this many seconds for the server before starting (0/undefined: no wait). */
  warmupS?: number;
  retries?: number;
  /** In-process (tfjs:) policies: how the base's linear layers sample (recorded in the run's metadata). */
  quantization?: QuantizationName;
  /** In-process (tfjs:) policies: how the sampler's KV cache is stored (lib/model/kv-cache-dtype.ts). */
  kvCacheDtype?: KvCacheDtypeName;
  backoffMs?: number;
  requestTimeoutS?: number;
  /** SQL worker processes when no executor is given. */
  workers?: number;
  executor?: Executor;
  /** Replace the environment (tests, benches). */
  env?: RolloutEnv;
  progressStream?: NodeJS.WritableStream & { isTTY?: boolean };
  /** Where notes that are not progress go (tasks skipped for a missing database); default: the progress stream. */
  onNote?: (text: string) => void;
  onProgress?: (p: ProgressSnapshot) => void;
  progressIntervalMs?: number;
  /** Group the summary by these row fields (default difficulty, archetype). */
  by?: string[];
}

export interface BenchmarkResult {
  result: RolloutResult;
  summary: Summary;
  facts: RolloutFacts;
  policy: string;
}

/**
 * An executor pool started on first use: a resumed run with nothing left to do, or one whose requests
 * all fail, never spawns SQL workers. Closing waits for workers still starting, since a pool closed
 * mid-start can leave its caller waiting.
 */
function lazyPool(workers?: number): Executor {
  let pool: ExecutorPool | undefined;
  return {
    execute(dbPath, sql, options) {
      pool ??= new ExecutorPool({ workers });
      return pool.execute(dbPath, sql, options);
    },
    async close() {
      if (!pool) return;
      await pool.ready().catch(() => undefined);
      await pool.close();
    },
  };
}

/**
 * Refuses a padding level that leaves no room for a whole reply: the padded prompt plus max_tokens must
 * fit the model's context, or a reply the level cut short would be graded as the model's failure.
 */
export function checkPaddingFits(policy: Policy, tokens: number, maxTokens: number): void {
  const window = policy.contextWindow?.() ?? null;
  if (window !== null && tokens + maxTokens > window) {
    const most = window - maxTokens;
    throw new UsageError(
      `padding to ${tokens} tokens (--pad-context, --levels) plus --max-tokens ${maxTokens} passes the ${window}-token context of ${policy.model ?? policy.name}: ` +
        (most > 0 ? `the highest level that leaves room for a whole reply is ${most} (or lower --max-tokens)` : `--max-tokens alone fills it; lower --max-tokens`),
    );
  }
}

/** Runs (or resumes) a benchmark and returns its rows, pass@k summary and failure breakdown. */
export async function benchmark(opts: BenchmarkOptions): Promise<BenchmarkResult> {
  let all: Task[];
  let skipped = "";
  if (typeof opts.tasks === "string") {
    const loaded = loadTaskSource(opts.tasks, { strict: opts.strict });
    if (loaded.missing.length) {
      skipped = describeMissing(loaded.missing);
      if (opts.onNote) opts.onNote(skipped);
      else opts.progressStream?.write(skipped + "\n");
    }
    all = loaded.tasks;
  } else all = opts.tasks;
  const chosen = selectTasks(all, opts.split, opts.limit, opts.band);
  const tasks = opts.sample ? sampleTasks(chosen, opts.sample.n, opts.sample.seed) : chosen;
  const band = opts.band ? `, band [${opts.band.lo}, ${opts.band.hi}] of ${opts.band.rows}` : "";
  if (tasks.length === 0) {
    // the error itself says why, whatever was shown before (--quiet shows nothing)
    const why = skipped ? `; ${skipped.split("\n").map((l) => l.trim()).join(" ")}` : "";
    throw new T2sError("no_tasks", `no tasks to run${opts.split ? ` in split '${opts.split}'` : ""}${band}${typeof opts.tasks === "string" ? ` of ${opts.tasks}` : ""}${why}`);
  }
  const style = opts.style ?? "single";
  if (opts.padContext !== undefined && style !== "single") {
    throw new UsageError(`--pad-context pads single-style episodes (the model answers once after the padding); --style ${style} is not supported`);
  }
  const toolRows = opts.toolRows ?? TOOL_ROWS;
  const prompt: PromptConfig = { style, protocol: opts.protocol, maxToolCalls: opts.maxToolCalls, toolRows };
  const concurrency = opts.concurrency ?? CONCURRENCY;
  if (typeof opts.policy === "string" && opts.policy.startsWith("tfjs:")) {
    // loaded only for in-process policies: the model code is heavy and an OpenAI run never needs it
    const [{ parseTfjsSpec }, { assertTokenizerFile }] = await Promise.all([import("../policy/tfjs.js"), import("../model/load.js")]);
    assertTokenizerFile(parseTfjsSpec(opts.policy.slice("tfjs:".length)).modelDir);
  }
  const policy = typeof opts.policy === "string"
    ? await loadPolicy(opts.policy, { quantization: opts.quantization, kvCacheDtype: opts.kvCacheDtype, allowBaseMismatch: opts.allowBaseMismatch, concurrency, retries: opts.retries, backoffMs: opts.backoffMs, timeoutMs: opts.requestTimeoutS !== undefined ? opts.requestTimeoutS * 1000 : undefined })
    : opts.policy;
  const ownExecutor = !opts.executor && !opts.env ? lazyPool(opts.workers) : undefined;
  try {
    if (opts.warmupS && policy.warmup) await policy.warmup(opts.warmupS * 1000);
    const base = opts.env ?? defaultEnv({ executor: (opts.executor ?? ownExecutor)!, prompt, preset: opts.preset, toolRows, toolTimeoutMs: opts.toolTimeoutMs, grading: opts.grading });
    const toolOutput = { maxRows: toolRows, maxChars: opts.toolChars ?? TOOL_CHARS, mode: opts.toolTruncate ?? "middle" } as const;
    const maxTokens = opts.sampling?.max_tokens ?? MAX_TOKENS_PER_TURN;
    const padding = opts.padContext === undefined ? undefined : { tokens: opts.padContext, seed: opts.padSeed ?? 0 };
    if (padding) checkPaddingFits(policy, padding.tokens, maxTokens);
    const env = padding ? paddedEnv(base, policy, padding, toolOutput) : base;
    const k = opts.k ?? SAMPLES_PER_TASK;
    const result = await runRollout(tasks, policy, env, {
      out: resolve(opts.out),
      k,
      evalRun: opts.evalRun,
      seed: opts.seed,
      concurrency,
      promptHash: promptTemplateHash(prompt),
      tasksHash: tasksHash(all),
      tasksFile: typeof opts.tasks === "string" ? resolve(opts.tasks) : undefined,
      dbHashes: databaseHashes(tasks),
      force: opts.force,
      grading: opts.grading,
      progressStream: opts.progressStream,
      onProgress: opts.onProgress,
      progressIntervalMs: opts.progressIntervalMs,
      padding,
      episode: {
        style,
        protocol: opts.protocol,
        maxToolCalls: opts.maxToolCalls,
        maxContextTokens: opts.maxContextTokens,
        endOnUnsafeTool: opts.preset === "tool-rl",
        toolOutput,
        sampling: { temperature: opts.sampling?.temperature ?? SAMPLING_TEMPERATURE, top_p: opts.sampling?.top_p, max_tokens: maxTokens },
      },
    });
    const summary = summarize(result.rows, { k, by: opts.by ?? ["difficulty", "archetype"] });
    return { result, summary, facts: rolloutFacts(result.rows), policy: policy.name };
  } finally {
    if (typeof opts.policy === "string") await policy.close?.();
    await ownExecutor?.close();
  }
}
