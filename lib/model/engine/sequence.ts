/**
 * One sequence as the generation engine holds it between submission and its end, and what is worked out
 * from a sequence alone each step: the sampling settings of its next token, and its grammar's answer to the
 * token it drew.
 */
import type { Uniform } from "../../core/random.js";
import type { RowSampling, SampledToken } from "./runner.js";
import type { StopWatcher } from "./stops.js";
import type { Generation, SequenceRequest } from "./types.js";

/** A sequence in the engine: its request, its slot (-1 while it waits), what it made so far. */
export interface Sequence {
  req: SequenceRequest;
  rand: Uniform;
  slot: number;
  stops: StopWatcher;
  out: number[];
  logprobs: number[];
  top: { id: number; logprob: number }[][];
  counts: Map<number, number>;
  /** The request's logit bias, read once (it may be any iterable). */
  bias: Map<number, number>;
  maxTokens: number;
  /** performance.now() at submission. */
  submitted: number;
  /** Guided decoding: the tokens allowed next (refreshed before each step). */
  mask?: Int32Array;
  resolve: (g: Generation) => void;
  reject: (e: unknown) => void;
  done: boolean;
}

/** This token's sampling for a sequence: its settings, its next uniform number and its logit bias. */
export function rowSampling(s: Sequence, eos: Set<number>): RowSampling {
  const r = s.req;
  const temperature = r.temperature ?? 1;
  const penalised = !!(r.presencePenalty || r.frequencyPenalty);
  const banning = (r.minTokens ?? 0) > s.out.length;
  // the request's own bias serves every step as it is; a copy only when this step adds to it
  const bias = penalised || banning ? new Map(s.bias) : s.bias;
  if (penalised) {
    for (const [id, n] of s.counts) bias.set(id, (bias.get(id) ?? 0) - (r.presencePenalty ?? 0) - (r.frequencyPenalty ?? 0) * n);
  }
  if (banning) for (const id of [...eos, ...(r.stopTokenIds ?? [])]) bias.set(id, -Infinity);
  return {
    temperature,
    topP: r.topP ?? 1,
    topK: r.topK ?? 0,
    // drawn only when sampling, so greedy rows and the old sampler's streams line up
    u: temperature > 0 ? s.rand() : 0,
    bias: bias.size ? bias : undefined,
    topLogprobs: r.topLogprobs ?? 0,
    rawLogprobs: r.logprobsMode === "raw" || undefined,
    allowed: s.mask,
  };
}

/**
 * Guided rows' grammars advanced by their sampled tokens (the matchers may answer from another thread):
 * per row, true, false (the grammar refused the token) or the error that stopped the grammar.
 */
export async function advanceGuides(rows: Sequence[], sampled: SampledToken[]): Promise<unknown[]> {
  return Promise.all(
    rows.map(async (s, i) => {
      if (!s.req.constraint || s.done) return true;
      try {
        return await s.req.constraint.accept(sampled[i].id);
      } catch (e) {
        return e instanceof Error ? e : new Error(String(e));
      }
    }),
  );
}
