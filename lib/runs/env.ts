/**
 * The real environment of a rollout: prompts built from the database's schema and notes, tool queries on
 * the read-only executor pool, grading by the verifier. Kept apart from the runner so tests and benches
 * can swap any piece.
 */
import type { Executor } from "../db/types.js";
import { schemaDdl, tableColumns } from "../db/schema.js";
import { notesFor } from "../db/notes.js";
import { openingMessages, type PromptConfig } from "../episode/prompt.js";
import { padOpening, type Padded } from "../episode/padding.js";
import type { ToolOutputOptions } from "../episode/truncate.js";
import type { ChatMessage, Policy } from "../policy/types.js";
import type { Task } from "../tasks/types.js";
import { grade } from "../verifier/grade.js";
import type { RewardPreset } from "../verifier/types.js";
import { UsageError } from "../core/errors.js";
import type { RunGrading, RunPadding } from "./meta.js";
import type { RolloutEnv } from "./rollout.js";
import { sampleSeed } from "./plan.js";
import { QUERY_TIMEOUT_MS, TOOL_ROWS } from "../core/defaults.js";

export interface EnvOptions {
  executor: Executor;
  prompt: PromptConfig;
  /** Reward preset passed to the grader (its default when unset). */
  preset?: RewardPreset;
  /** Rows a tool query returns at most (default: the prompt's toolRows, else TOOL_ROWS). */
  toolRows?: number;
  /** Time limit of a tool query in ms (default QUERY_TIMEOUT_MS). */
  toolTimeoutMs?: number;
  /** Row cap, dialect and DISTINCT rule of grading (default: the verifier's and each task's own). */
  grading?: RunGrading;
}

/** Returns the environment that runs tool queries on `executor` and grades with the verifier. */
export function defaultEnv(opts: EnvOptions): RolloutEnv {
  const systemCache = new Map<string, { ddl: string; notes: string | undefined }>();
  const context = (task: Task) => {
    let c = systemCache.get(task.db_path);
    if (!c) {
      c = { ddl: schemaDdl(task.db_path), notes: notesFor(task) };
      systemCache.set(task.db_path, c);
    }
    return c;
  };
  return {
    opening(task: Task): ChatMessage[] {
      const c = context(task);
      return openingMessages(opts.prompt, c.ddl, c.notes, task.question, task.evidence);
    },
    runTool(task, query) {
      return opts.executor.execute(task.db_path, query, { maxRows: opts.toolRows ?? opts.prompt.toolRows ?? TOOL_ROWS, timeoutMs: opts.toolTimeoutMs ?? QUERY_TIMEOUT_MS });
    },
    grade(task, reply, facts) {
      const g = opts.grading ?? {};
      return grade(task, reply, { executor: opts.executor, preset: opts.preset, finishReason: facts.finishReason, invalidToolCalls: facts.invalidToolCalls, assistantTurns: facts.assistantTurns, unsafeToolQuery: facts.unsafeToolQuery, maxRows: g.max_rows, dialect: g.dialect, distinct: g.distinct });
    },
  };
}

/**
 * `env` with each opening padded to `spec.tokens` prompt tokens (lib/episode/padding.ts), the tokens
 * counted by `policy`'s own chat template and tokenizer and the padding queries run by `env`'s tool. A
 * task is padded once and every sample of it sees the same turns.
 */
export function paddedEnv(env: RolloutEnv, policy: Policy, spec: RunPadding, toolOutput: ToolOutputOptions): RolloutEnv {
  const count = policy.promptTokens?.bind(policy);
  if (!count) throw new UsageError(`context padding (--pad-context) counts prompt tokens with the model's own tokenizer, which ${policy.name} cannot do; pad with a tfjs:<model dir> policy`);
  const columns = new Map<string, Map<string, string[]>>();
  const done = new Map<string, Promise<Padded>>();
  const padded = (task: Task): Promise<Padded> => {
    let p = done.get(task.id);
    if (!p) {
      p = (async () => {
        let cols = columns.get(task.db_path);
        if (!cols) columns.set(task.db_path, (cols = tableColumns(task.db_path)));
        const deps = { runTool: (q: string) => env.runTool(task, q), countTokens: (m: ChatMessage[]) => count(m) };
        return padOpening(await env.opening(task), task.gold_sql, cols, deps, { tokens: spec.tokens, seed: sampleSeed(spec.seed, "pad-context", task.id, 0), toolOutput });
      })();
      // a failed padding (a database gone mid-run) is tried again by the next sample, not remembered
      p.catch(() => done.delete(task.id));
      done.set(task.id, p);
    }
    return p;
  };
  return {
    opening: async (task) => (await padded(task)).messages,
    runTool: (task, query) => env.runTool(task, query),
    grade: (task, reply, facts) => env.grade(task, reply, facts),
  };
}
