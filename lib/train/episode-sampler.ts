/**
 * GRPO sampling through the real episode loop with the in-process model: every episode of a step runs
 * concurrently through lib/episode's runEpisode (so tool calls, budgets and grading behave exactly as in
 * evaluation), and a policy over lib/model's generate() batches their concurrent turns into one call and
 * records, per turn, the prompt ids and the generated ids as a training row.
 */
import { T2sError, isT2sError } from "../errors.js";
import { runEpisode, type EpisodeOptions, type EpisodeResult } from "../episode/loop.js";
import { generate, type Generation, type GenerationRequest } from "../model/generate.js";
import type { CausalLM } from "../model/model.js";
import type { TemplateMessage } from "../model/tokenizer.js";
import type { ChatMessage, Completion, Policy, SampleOptions, ToolSpec } from "../policy/types.js";
import type { RolloutEnv } from "../runs/rollout.js";
import type { Task } from "../tasks/types.js";
import type { TokenRow } from "./batching.js";
import type { Grader, Rollout, Sampler } from "./grpo.js";

export interface ModelPolicyOptions {
  /** Adapter applied while sampling (the one being trained); null = the base. */
  adapter: string | null;
  temperature: number;
  topP: number;
  /** Rows per generate() call at most (default 64). */
  maxBatch?: number;
}

function templateMessages(messages: ChatMessage[]): TemplateMessage[] {
  return messages.map((m) => {
    const out: TemplateMessage = { role: m.role, content: m.content ?? "" };
    if (m.tool_calls?.length) out.tool_calls = m.tool_calls.map((c) => ({ id: c.id, type: "function", function: { name: c.function.name, arguments: safeJson(c.function.arguments) } }));
    if (m.tool_call_id) out.tool_call_id = m.tool_call_id;
    if (m.name) out.name = m.name;
    return out;
  });
}

function safeJson(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return text;
  }
}

/**
 * A Policy over the in-process model. Requests that arrive while the model is busy (or in the same tick)
 * are sampled together in one batched generate() call; each request's seed fixes its tokens regardless of
 * the batch it lands in. `recording()` returns a per-episode view that keeps the token rows of its turns.
 */
export class ModelPolicy implements Policy {
  readonly name: string;
  readonly model: string;
  readonly adapter: string | null;
  private queue: Array<{ req: GenerationRequest; resolve: (g: Generation) => void; reject: (e: unknown) => void }> = [];
  private running = false;

  constructor(readonly lm: CausalLM, readonly opts: ModelPolicyOptions) {
    this.name = `tfjs:${lm.name}${opts.adapter ? `+${opts.adapter}` : ""}`;
    this.model = lm.name;
    this.adapter = opts.adapter;
    if (!lm.tokenizer?.hasChatTemplate) throw new T2sError("no_chat_template", `model ${lm.name} has no chat template; episodes need one`);
  }

  /** The prompt ids of a conversation (chat template with tools, generation prompt appended). */
  promptIds(messages: ChatMessage[], tools?: ToolSpec[]): number[] {
    const tok = this.lm.requireTokenizer();
    return tok.encode(tok.applyChatTemplate(templateMessages(messages), { tools, addGenerationPrompt: true }), { addSpecialTokens: false });
  }

  async complete(messages: ChatMessage[], opts: SampleOptions & { tools?: ToolSpec[] }): Promise<Completion[]> {
    return [(await this.turn(messages, opts)).completion];
  }

  /** Samples one turn; returns the completion and the training row (prompt ids masked out). */
  async turn(messages: ChatMessage[], opts: SampleOptions & { tools?: ToolSpec[] }): Promise<{ completion: Completion; row: TokenRow }> {
    const t0 = Date.now();
    const ids = this.promptIds(messages, opts.tools);
    const room = this.lm.config.maxPositions - ids.length;
    if (room <= 0) throw new T2sError("context_length_exceeded", `the prompt has ${ids.length} tokens but ${this.lm.name} takes at most ${this.lm.config.maxPositions}`);
    const gen = await this.enqueue({ ids, maxTokens: Math.min(opts.max_tokens ?? room, room), stop: opts.stop, seed: opts.seed ?? 0, sampleIndex: 0 });
    const completion: Completion = {
      text: gen.text,
      tool_calls: [],
      finish_reason: gen.finishReason === "length" ? "length" : "stop",
      tokens_in: ids.length,
      tokens_out: gen.ids.length,
      latency_ms: Date.now() - t0,
    };
    const row: TokenRow = {
      ids: [...ids, ...gen.ids],
      mask: [...new Array<number>(ids.length).fill(0), ...new Array<number>(gen.ids.length).fill(1)],
      logprobs: [...new Array<number>(ids.length).fill(NaN), ...gen.logprobs],
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

  private enqueue(req: GenerationRequest): Promise<Generation> {
    return new Promise((resolve, reject) => {
      this.queue.push({ req, resolve, reject });
      if (!this.running) {
        this.running = true;
        setImmediate(() => void this.drain());
      }
    });
  }

  private async drain(): Promise<void> {
    try {
      while (this.queue.length) {
        const batch = this.queue.splice(0, this.opts.maxBatch ?? 64);
        try {
          const gens = await generate(this.lm, batch.map((b) => b.req), { adapter: this.opts.adapter, temperature: this.opts.temperature, topP: this.opts.topP });
          batch.forEach((b, i) => b.resolve(gens[i]));
        } catch (e) {
          for (const b of batch) b.reject(e);
        }
        // let episodes that just got their turn queue their next one before the next batch starts
        await new Promise((r) => setImmediate(r));
      }
    } finally {
      this.running = false;
    }
  }
}

export interface EpisodeSamplerOptions {
  policy: ModelPolicy;
  env: RolloutEnv;
  episode: Omit<EpisodeOptions, "sampling" | "onRetry" | "signal">;
  sampling: { temperature: number; top_p: number; max_tokens: number };
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
    return tasks.map((_, i) => all.slice(i * groupSize, (i + 1) * groupSize));
  };
}

/** The grader that goes with episodeSampler: the verifier already graded each episode inside the loop. */
export const episodeGrader: Grader<Task> = async (_task, rollout) => {
  const info = rollout.info as EpisodeInfo;
  if (!info?.result) return { reward: NaN, correct: false };
  return { reward: info.result.grade.reward, correct: info.result.grade.correct };
};
