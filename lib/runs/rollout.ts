/**
 * A rollout: k sampled episodes per task, written to a rows store as each lands, resumable. Tasks,
 * policy and the environment (prompts, tool execution, grading) come in from the caller, so this file is
 * the scheduling and bookkeeping only: plan the missing samples, run them `concurrency` at a time, count
 * re-rolls, losses and refusals, keep the metadata sidecar honest.
 */
import { randomBytes } from "node:crypto";
import { setMaxListeners } from "node:events";
import { appendFileSync, mkdirSync } from "node:fs";
import { dirname } from "node:path";
import type { ExecOutcome } from "../db/types.js";
import { T2sError, UsageError, isT2sError } from "../core/errors.js";
import { runEpisode, type EpisodeOptions, type GradeFacts, type Sampling } from "../episode/loop.js";
import { kitVersion } from "../core/paths.js";
import { PolicyError, type ChatMessage, type Policy } from "../policy/types.js";
import type { Task } from "../tasks/types.js";
import type { GradeResult } from "../verifier/types.js";
import { lockRows, removeDeadTemps } from "./lock.js";
import { gradingMeta, metaDifferences, metaPath, readMeta, tasksHash, writeMeta, type RunGrading, type RunMeta, type RunPadding } from "./meta.js";
import { planEpisodes } from "./plan.js";
import { Progress, type ProgressSnapshot } from "./progress.js";
import { makeRow, makeSetupRow, type RowContext } from "./episode-row.js";
import type { RolloutRow } from "./row.js";
import { RowsStore } from "./store.js";
import { CONCURRENCY, MAX_TOOL_CALLS, TOOL_CHARS, TOOL_ROWS } from "../core/defaults.js";

/** What an episode needs from the world besides the policy. */
export interface RolloutEnv {
  /** The opening messages (system prompt with schema and notes, user question) of a task's episodes. */
  opening(task: Task): ChatMessage[] | Promise<ChatMessage[]>;
  /** Runs one tool query on the task's database. */
  runTool(task: Task, query: string): Promise<ExecOutcome>;
  /** Grades a committed reply against the task's gold query. */
  grade(task: Task, reply: string, facts: GradeFacts): Promise<GradeResult>;
}

export interface RolloutOptions {
  /** The rows file (jsonl); its sidecar is `<out>.meta.json`. */
  out: string;
  /** Samples per task. */
  k: number;
  /** Replication id; rows are keyed by (eval run, task, sample). Default "0" (the stats default). */
  evalRun?: string;
  /** Run seed; each sample's seed derives from (seed, eval run, task, sample). Default 0. */
  seed?: number;
  episode: Omit<EpisodeOptions, "sampling" | "onRetry" | "signal"> & { sampling?: Omit<Sampling, "seed"> };
  /** Episodes in flight at once (default 8). */
  concurrency?: number;
  /** Hash of the prompt templates (lib/episode/prompt.ts promptTemplateHash). */
  promptHash: string;
  /** Hash of the whole task set (default: of `tasks`). Pass the file's hash when `tasks` is a subset. */
  tasksHash?: string;
  tasksFile?: string;
  /** sha256 of each database the tasks run on, by db_id (meta.databaseHashes); recorded, and a top-up against another file is refused. */
  dbHashes?: Record<string, string>;
  /** Add to a rows file whose metadata differs (recorded in the sidecar). */
  force?: boolean;
  /** Grading options other than the defaults, recorded in the sidecar (meta.ts RunGrading). */
  grading?: RunGrading;
  progressStream?: NodeJS.WritableStream & { isTTY?: boolean };
  onProgress?: (p: ProgressSnapshot) => void;
  progressIntervalMs?: number;
  /** fsync each row (survives power loss, not only a killed process). Default false. */
  fsync?: boolean;
  /** The context padding `env`'s openings carry (env.ts paddedEnv), recorded in the sidecar and every row. */
  padding?: RunPadding;
}

export interface RolloutResult {
  /** The rows of these tasks, this eval run and samples < k (old and new), in file order. */
  rows: RolloutRow[];
  progress: ProgressSnapshot;
  meta: RunMeta;
  /** Bytes of a torn last line cut off at the start. */
  tornBytes: number;
  /** Duplicate rows found in the file (ignored). */
  duplicates: number;
  /** The first error message seen for each loss reason. */
  lostExamples: Record<string, string>;
  /** The first refusal seen for each setup-error reason (its row is in the file, left out of `rows`). */
  refusedExamples: Record<string, string>;
}

function currentMeta(tasks: Task[], policy: Policy, opts: RolloutOptions): RunMeta {
  const ep = opts.episode;
  const s = ep.sampling ?? {};
  const tool = ep.style === "tool";
  // padding turns show tool output in either style, so how it is shown is part of the setup
  const shown = tool || opts.padding !== undefined;
  return {
    run_id: randomBytes(6).toString("hex"),
    created_at: new Date().toISOString(),
    kit_version: kitVersion(),
    policy: policy.name,
    model: policy.model ?? null,
    adapter: policy.adapter ?? null,
    ...(policy.quantization ? { quantization: policy.quantization } : {}),
    style: ep.style,
    protocol: tool ? ep.protocol ?? "native" : null,
    sampling: { temperature: s.temperature ?? null, top_p: s.top_p ?? null, max_tokens: s.max_tokens ?? null, seed: opts.seed ?? 0 },
    max_tool_calls: tool ? ep.maxToolCalls ?? MAX_TOOL_CALLS : null,
    max_context_tokens: ep.maxContextTokens ?? null,
    tool_output: shown ? { max_rows: ep.toolOutput?.maxRows ?? TOOL_ROWS, max_chars: ep.toolOutput?.maxChars ?? TOOL_CHARS, mode: ep.toolOutput?.mode ?? "middle" } : null,
    ...(opts.padding ? { padding: { tokens: opts.padding.tokens, seed: opts.padding.seed } } : {}),
    prompt_hash: opts.promptHash,
    tasks_hash: opts.tasksHash ?? tasksHash(tasks),
    tasks_file: opts.tasksFile ?? null,
    ...(opts.dbHashes ? { db_sha256: opts.dbHashes } : {}),
    k: opts.k,
    ...gradingMeta(tasks, opts.grading),
  };
}

/** Checks the sidecar against this run and returns the metadata to write (keeping the run id). */
function reconcileMeta(existing: RunMeta | null, now: RunMeta, hasRows: boolean, opts: RolloutOptions): RunMeta {
  if (!existing && hasRows) {
    // rows without their sidecar: nothing says what setup they came from, so adding to them could mix two
    if (!opts.force) {
      throw new T2sError(
        "no_meta",
        `${opts.out} holds rows but no ${metaPath(opts.out)} recording their setup, so this run cannot be checked against them. ` +
          `Write to a new --out, restore the .meta.json, or pass --force to add to it anyway (recorded in the new sidecar).`,
      );
    }
    return { ...now, forced: [`${metaPath(opts.out)} was missing; earlier rows' setup unknown`] };
  }
  if (!existing || !hasRows) return now;
  const diffs = metaDifferences(existing, now);
  if (diffs.length && !opts.force) {
    throw new T2sError(
      "not_comparable",
      `${opts.out} holds rows of a different setup (${diffs.join("; ")}). Write to a new --out, or pass --force to add to it anyway.`,
    );
  }
  const db_sha256 = existing.db_sha256 || now.db_sha256 ? { ...existing.db_sha256, ...now.db_sha256 } : undefined;
  return { ...now, ...(db_sha256 ? { db_sha256 } : {}), run_id: existing.run_id, created_at: existing.created_at, forced: [...(existing.forced ?? []), ...diffs] };
}

/**
 * Runs the missing episodes of `tasks` (topping each up to k samples in the rows file) and returns the
 * graded rows, final progress and metadata. Lost episodes (retries exhausted, rejected requests, failing
 * gold) write no row, so running again fills them. An episode the server refused for the run's setup
 * (PolicyError `setup`: context, key, model name) writes a setup-error row, which no statistic counts and
 * a later run replaces. A fatal policy error (bad key, unknown model) stops the run and throws
 * T2sError("policy_<reason>"), as does a run whose every episode was refused for one same reason.
 */
export async function runRollout(tasks: Task[], policy: Policy, env: RolloutEnv, opts: RolloutOptions): Promise<RolloutResult> {
  if (!Number.isInteger(opts.k) || opts.k < 1) throw new UsageError(`k must be an integer >= 1, got ${opts.k}`);
  const ids = new Set<string>();
  for (const t of tasks) {
    if (ids.has(t.id)) throw new T2sError("duplicate_task", `task id ${t.id} appears twice in the task set; ids must be unique`);
    ids.add(t.id);
  }
  mkdirSync(dirname(opts.out), { recursive: true });
  const unlock = lockRows(opts.out);
  try {
    return await rollOut(tasks, ids, policy, env, opts);
  } finally {
    unlock();
  }
}

async function rollOut(tasks: Task[], ids: Set<string>, policy: Policy, env: RolloutEnv, opts: RolloutOptions): Promise<RolloutResult> {
  const evalRun = opts.evalRun ?? "0";
  const seed = opts.seed ?? 0;
  const sidecar = metaPath(opts.out);
  removeDeadTemps(sidecar); // a sidecar write killed midway
  const existingMeta = readMeta(sidecar);
  const { store, tornBytes, duplicates } = RowsStore.open(opts.out);
  const meta = reconcileMeta(existingMeta, currentMeta(tasks, policy, opts), store.rows.length > 0, opts);
  if (!existingMeta && store.rows.length > 0 && typeof store.rows[0].run_id === "string") meta.run_id = store.rows[0].run_id;
  writeMeta(sidecar, meta);
  appendFileSync(opts.out, ""); // the rows file exists from the start, even if no episode lands

  const plan = planEpisodes(tasks, opts.k, evalRun, seed, (e, t, s) => store.has(e, t, s));
  const progress = new Progress({ total: tasks.length * opts.k, resumed: plan.done, stream: opts.progressStream, onProgress: opts.onProgress, intervalMs: opts.progressIntervalMs });
  const lostExamples: Record<string, string> = {};
  const refusedExamples: Record<string, string> = {};
  const abort = new AbortController();
  setMaxListeners(0, abort.signal); // every request in flight listens on the one run-wide signal
  let fatal: unknown = null;
  let next = 0;
  const ep = opts.episode;

  const worker = async (): Promise<void> => {
    while (fatal === null && next < plan.todo.length) {
      const item = plan.todo[next++];
      let rerolls = 0;
      let opening: ChatMessage[] = [];
      const context = (): RowContext => ({
        run_id: meta.run_id, eval_run: evalRun, sample: item.sample, seed: item.seed,
        policy: policy.name, model: policy.model ?? null, adapter: policy.adapter ?? null,
        style: ep.style, protocol: ep.style === "tool" ? ep.protocol ?? "native" : null, rerolls,
        ...(opts.padding ? { pad_context: opts.padding.tokens, pad_calls: opening.filter((m) => m.role === "assistant").length } : {}),
      });
      try {
        opening = await env.opening(item.task);
        const result = await runEpisode(
          opening,
          { policy, runTool: (q) => env.runTool(item.task, q), grade: (r, f) => env.grade(item.task, r, f) },
          {
            ...ep,
            sampling: { ...ep.sampling, seed: item.seed },
            signal: abort.signal,
            onRetry: (reason) => {
              rerolls++;
              progress.rerolled(reason);
            },
          },
        );
        const row = makeRow(item.task, context(), result);
        // once the run is fatal (a failed append among them) no episode still in flight writes its row
        if (fatal !== null) return;
        store.append(row, { fsync: opts.fsync });
        progress.landed();
      } catch (e) {
        if (fatal !== null) return;
        if (e instanceof PolicyError && e.setup) {
          try {
            store.append(makeSetupRow(item.task, context(), opening, e.reason, e.message), { fsync: opts.fsync });
          } catch (failed) {
            fatal = failed;
            abort.abort();
            return;
          }
          refusedExamples[e.reason] ??= `${item.task.id}: ${e.message}`;
          progress.refused(e.reason);
          if (e.fatal) {
            // a refused key or an unknown model refuses every other episode alike: stop at the first
            fatal = e;
            abort.abort();
            return;
          }
          continue;
        }
        const reason = e instanceof PolicyError && !e.fatal && e.reason !== "aborted" ? e.reason : isT2sError(e, "gold_failed") ? "gold_failed" : null;
        if (reason === null) {
          fatal = e;
          abort.abort();
          return;
        }
        lostExamples[reason] ??= `${item.task.id}: ${(e as Error).message}`;
        progress.lost(reason);
      }
    }
  };

  const n = Math.max(1, Math.min(opts.concurrency ?? CONCURRENCY, plan.todo.length || 1));
  await Promise.all(Array.from({ length: n }, worker));
  const final = progress.finish();
  if (fatal !== null) {
    if (fatal instanceof PolicyError) throw new T2sError(`policy_${fatal.reason}`, fatal.message);
    throw fatal;
  }
  const refusedReasons = Object.keys(final.refused_by);
  if (final.refused === plan.todo.length && refusedReasons.length === 1) {
    // nothing this run asked for was answered, all for one reason: that reason is the result, not a score
    const reason = refusedReasons[0];
    throw new T2sError(`policy_${reason}`, `every episode of this run (${final.refused}) was refused for the setup, so nothing was scored; the first: ${refusedExamples[reason]}`);
  }
  const rows = store.rows.filter((r) => r.eval_run === evalRun && ids.has(r.task_id) && r.sample < opts.k);
  return { rows, progress: final, meta, tornBytes, duplicates, lostExamples, refusedExamples };
}
