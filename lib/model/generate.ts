/**
 * Batched sampling of a fixed set of prompts, on the generation engine (lib/model/engine/): every prompt is
 * one sequence, admitted as slots allow, and finished rows leave at once. The longest prefix common to all
 * prompts (a system prompt with the schema, or one prompt sampled G times) is computed once and attended to
 * from one stored copy.
 */
import { T2sError } from "../core/errors.js";
import { GenerationEngine } from "./engine/generation-engine.js";
import type { Generation, SequenceRequest } from "./engine/types.js";
import type { CausalLM } from "./model.js";
import { commonPrefix } from "./prefix.js";

export type { Generation, SequenceRequest, TokenDelta } from "./engine/types.js";

/** One prompt of a batch with its own limits (fields override the batch options). */
export type GenerationRequest = SequenceRequest;

export interface GenerateOptions {
  /** New tokens per sequence at most (default 256). */
  maxTokens?: number;
  /** 0 = greedy (default 1). */
  temperature?: number;
  topP?: number;
  /** 0 = no top-k cut. */
  topK?: number;
  seed?: number;
  stop?: string[];
  /** Unmerged adapter to apply (attached to the model under this name). */
  adapter?: string | null;
  /** Ids that end a sequence (default: the tokenizer's eos ids, else config.json's). */
  eosIds?: number[];
  /** Compute the common prefix once (default true). */
  sharePrefix?: boolean;
  /** Sequences decoded together at most (default: all prompts). */
  maxBatch?: number;
  /** Called with each new piece of a row's text, safe to show (never part of a stop string). */
  onText?: (row: number, delta: string) => void;
}

export type { GenerationFinish } from "./engine/types.js";

export interface GenerateStats {
  /** Tokens of the common prefix computed once. */
  prefixTokens: number;
  /** Decoding steps after the prompt. */
  steps: number;
}

/**
 * Samples continuations for a batch of prompts (token ids) and returns one Generation per prompt, in order.
 * `stats`, when given, receives the prefix length and step count.
 */
export async function generate(model: CausalLM, prompts: (number[] | GenerationRequest)[], opts: GenerateOptions = {}, stats?: GenerateStats): Promise<Generation[]> {
  const reqs: GenerationRequest[] = prompts.map((p) => (Array.isArray(p) ? { ids: p } : p));
  if (reqs.length === 0) return [];
  for (const r of reqs) if (r.ids.length === 0) throw new T2sError("usage", "every prompt needs at least one token");
  const ids = reqs.map((r) => r.ids);
  const prefix = opts.sharePrefix !== false && ids.length > 1 ? Math.max(0, Math.min(commonPrefix(ids), Math.min(...ids.map((x) => x.length)) - 1)) : 0;
  const engine = await GenerationEngine.create(model, { adapter: opts.adapter ?? null, maxBatch: opts.maxBatch ?? reqs.length, eosIds: opts.eosIds });
  try {
    const out = await Promise.all(
      reqs.map((r, i) =>
        engine.submit({
          ...r,
          maxTokens: r.maxTokens ?? opts.maxTokens,
          stop: r.stop ?? opts.stop,
          seed: r.seed ?? opts.seed ?? 0,
          sampleIndex: r.sampleIndex ?? i,
          temperature: r.temperature ?? opts.temperature ?? 1,
          topP: r.topP ?? opts.topP ?? 1,
          topK: r.topK ?? opts.topK ?? 0,
          prefixLength: r.prefixLength ?? prefix,
          onDelta: opts.onText ? (d) => d.text && opts.onText!(i, d.text) : r.onDelta,
        }),
      ),
    );
    if (stats) {
      stats.prefixTokens = prefix;
      stats.steps = engine.metrics.steps;
    }
    return out;
  } finally {
    await engine.close();
  }
}
