/**
 * GRPO sampling through the real episode loop with the in-process model: every episode of a step runs
 * concurrently through lib/episode's runEpisode (so tool calls, budgets and grading behave exactly as in
 * evaluation), and the in-process policy of lib/policy/tfjs.ts shares the generation engine's decode steps
 * among their concurrent turns, samples each turn with the settings its request carries, and records, per
 * turn, the prompt ids and the generated ids as a training row.
 */
import { T2sError, isT2sError } from "../core/errors.js";
import { runEpisode, type EpisodeOptions, type EpisodeResult } from "../episode/loop.js";
import type { CausalLM } from "../model/model.js";
import { ChatEngine } from "../model/chat.js";
import { chatPolicy, type ChatPolicy } from "../policy/tfjs.js";
import type { ChatMessage, Completion, Policy, SampleOptions, Sampling, ToolSpec } from "../policy/types.js";
import type { RolloutEnv } from "../runs/rollout.js";
import type { Task } from "../tasks/types.js";
import type { TokenRow } from "./batching.js";
import type { Grader, Rollout, Sampler } from "./grpo.js";

export interface ModelPolicyOptions {
  /** Adapter applied while sampling (the one being trained); null = the base. */
  adapter: string | null;
  /** Sequences decoded together at most (default 64). */
  maxBatch?: number;
  /** Tokens per sequence the sampler's cache holds (default: the runner's cap). */
  maxLength?: number;
  /** Keep prompts' keys and values across the step's requests (default true; sampling.prefix_caching). */
  prefixCaching?: boolean;
}

/**
 * The in-process policy (lib/policy/tfjs.ts's, over the chat layer `t2s serve` uses: lib/model/chat.ts) on
 * the model being trained, with its adapter unmerged, so the trainer samples exactly the prompts and tool
 * calls a served model would, at the sampling settings each request carries. Concurrent episodes share the
 * generation engine's decode steps; each request's seed fixes its tokens whatever else is running.
 * `recording()` returns a per-episode view that keeps the token rows of its turns.
 */
export class ModelPolicy implements Policy {
  readonly name: string;
  readonly model: string;
  readonly adapter: string | null;
  private readonly chat: ChatEngine;
  private readonly policy: ChatPolicy;

  constructor(readonly lm: CausalLM, readonly opts: ModelPolicyOptions) {
    this.name = `tfjs:${lm.name}${opts.adapter ? `+${opts.adapter}` : ""}`;
    this.model = lm.name;
    this.adapter = opts.adapter;
    if (!lm.requireTokenizer().hasChatTemplate) throw new T2sError("no_chat_template", `model ${lm.name} has no chat template; episodes need one`);
    this.chat = new ChatEngine(lm, [], { adapter: opts.adapter, maxBatch: opts.maxBatch, maxLength: opts.maxLength, enablePrefixCaching: opts.prefixCaching });
    this.policy = chatPolicy(this.chat, { name: this.name, model: this.model, adapter: this.adapter });
  }

  /** The prompt ids of a conversation (chat template with tools, generation prompt appended). */
  promptIds(messages: ChatMessage[], tools?: ToolSpec[]): number[] {
    return this.chat.promptIds({ model: this.lm.name, messages, tools });
  }

  async complete(messages: ChatMessage[], opts: SampleOptions & { tools?: ToolSpec[] }): Promise<Completion[]> {
    return [(await this.turn(messages, opts)).completion];
  }

  /** Samples one turn (one choice; seed 0 when the request has none); returns the completion and the training row (prompt ids masked out). */
  async turn(messages: ChatMessage[], opts: SampleOptions & { tools?: ToolSpec[] }): Promise<{ completion: Completion; row: TokenRow }> {
    const { completions, result: r } = await this.policy.turn(messages, { ...opts, n: 1, seed: opts.seed ?? 0 });
    const completion = completions[0];
    const c = r.choices[0];
    const ids = r.promptIds;
    const row: TokenRow = {
      ids: [...ids, ...c.ids],
      mask: [...new Array<number>(ids.length).fill(0), ...new Array<number>(c.ids.length).fill(1)],
      logprobs: [...new Array<number>(ids.length).fill(NaN), ...c.logprobs],
    };
    return { completion, row };
  }

  /** A per-episode policy that records the token row of every turn it samples. */
  recording(): Policy & { rows: TokenRow[] } {
    const rows: TokenRow[] = [];
    return {
      name: this.name,
      model: this.model,
      adapter: this.adapter,
      rows,
      complete: async (messages, opts) => {
        const { completion, row } = await this.turn(messages, opts);
        rows.push(row);
        return [completion];
      },
    };
  }

  /** The weights were updated: shared prefixes computed with the old ones are recomputed. */
  weightsChanged(): void {
    this.chat.weightsChanged();
  }

  /** Prompt tokens looked up in the prefix cache and found there so far (counters that never go down). */
  prefixCacheCounts(): { queries: number; hits: number } {
    const m = this.chat.metrics();
    return { queries: m.prefixCacheQueries, hits: m.prefixCacheHits };
  }

  /** Frees the engine (cancels anything still sampling). */
  close(): Promise<void> {
    return this.chat.close();
  }
}

export interface EpisodeSamplerOptions {
  policy: ModelPolicy;
  env: RolloutEnv;
  episode: Omit<EpisodeOptions, "sampling" | "onRetry" | "signal">;
  /** Every episode's sampling (each turn's seed is derived from the step's seed). */
  sampling: Required<Pick<Sampling, "temperature" | "top_p" | "max_tokens">>;
}

/** What the real sampler leaves on each rollout for the grader and the logs. */
export interface EpisodeInfo {
  task: Task;
  result: EpisodeResult | null;
  /** Why the episode produced no grade (a gold query that fails). */
  error?: string;
}

/** Returns a GRPO sampler that runs P x G real episodes per step, all turns batched through the model. */
export function episodeSampler(o: EpisodeSamplerOptions): Sampler<Task> {
  return async (tasks, groupSize, ctx) => {
    // each call starts a step, after the previous step's update changed the weights
    o.policy.weightsChanged();
    const before = o.policy.prefixCacheCounts();
    const one = async (task: Task, e: number): Promise<Rollout> => {
      const rec = o.policy.recording();
      const seed = (ctx.seed + e * 7919) % 2147483647;
      const opening = await o.env.opening(task);
      try {
        const result = await runEpisode(
          opening,
          { policy: rec, runTool: (q) => o.env.runTool(task, q), grade: (r, f) => o.env.grade(task, r, f) },
          { ...o.episode, sampling: { temperature: o.sampling.temperature, top_p: o.sampling.top_p, max_tokens: o.sampling.max_tokens, seed } },
        );
        const cut = result.truncated_by === "max_tokens" || result.truncated_by === "context";
        return { rows: rec.rows, truncated: cut, info: { task, result } satisfies EpisodeInfo };
      } catch (err) {
        if (!isT2sError(err, "gold_failed")) throw err;
        return { rows: rec.rows, truncated: false, info: { task, result: null, error: (err as Error).message } satisfies EpisodeInfo };
      }
    };
    const all = await Promise.all(tasks.flatMap((t, i) => Array.from({ length: groupSize }, (_, j) => one(t, i * groupSize + j))));
    const after = o.policy.prefixCacheCounts();
    const queries = after.queries - before.queries;
    // the step's share of prompt tokens found in the prefix cache (absent with caching off)
    if (ctx.log && queries > 0) ctx.log.prefix_cache_hit_rate = (after.hits - before.hits) / queries;
    return tasks.map((_, i) => all.slice(i * groupSize, (i + 1) * groupSize));
  };
}

/**
 * The grader that goes with episodeSampler: the verifier already graded each episode inside the loop.
 * With `minToolCalls`, an episode that made fewer valid tool calls earns at most 0, so a correct answer
 * written without probing is not rewarded: the reward then asks for the exploration it is meant to study,
 * which a policy that can also answer in one shot otherwise drops. `correct` stays the verifier's.
 */
export function episodeGrader(opts: { minToolCalls?: number } = {}): Grader<Task> {
  const min = opts.minToolCalls ?? 0;
  return async (_task, rollout) => {
    const info = rollout.info as EpisodeInfo;
    if (!info?.result) return { reward: NaN, correct: false };
    const { grade, n_tool_calls, invalid_tool_calls } = info.result;
    const probed = n_tool_calls - invalid_tool_calls >= min;
    return { reward: probed ? grade.reward : Math.min(grade.reward, 0), correct: grade.correct };
  };
}
