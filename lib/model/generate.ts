/**
 * Batched sampling with a KV cache. Prompts of different lengths share one batch: the longest common
 * prefix of all prompts (a system prompt with the schema, or the same prompt sampled G times) is run once
 * and kept as the cache's shared part, which every row attends to without a copy; the remaining suffixes
 * are left-padded and masked, each token carrying its own absolute position. Rows stop on an eos id, on a
 * stop string, or at their token budget, and finished rows leave the batch so later steps only compute
 * live rows.
 */
import { T2sError } from "../errors.js";
import { disposeCache, selectCacheRows, shareCache, type KvCache } from "./decoder.js";
import type { CausalLM } from "./model.js";
import { commonPrefix } from "./prefix.js";
import { sampleToken, sequenceRandom, type SamplingParams } from "./sampler.js";
import type { tf } from "./tf.js";

/** One prompt of a batch with its own limits (fields override the batch options). */
export interface GenerationRequest {
  ids: number[];
  maxTokens?: number;
  stop?: string[];
  seed?: number;
  /** Which sample of its request this row is (seeds differ per sample); default: its row index. */
  sampleIndex?: number;
  temperature?: number;
  topP?: number;
  topK?: number;
}

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
  /** Called with each new piece of a row's text, safe to show (never part of a stop string). */
  onText?: (row: number, delta: string) => void;
}

export type GenerationFinish = "stop" | "length";

export interface Generation {
  /** New token ids, including the eos id that ended it (if any). */
  ids: number[];
  /** The decoded text without the eos token and cut before a stop string. */
  text: string;
  /** Log-probability of each new token under softmax(logits / temperature). */
  logprobs: number[];
  finishReason: GenerationFinish;
  /** The stop string or "eos" that ended it (stop only). */
  stoppedBy?: string;
  promptTokens: number;
}

export interface GenerateStats {
  /** Tokens of the common prefix computed once. */
  prefixTokens: number;
  /** Decoding steps after the prompt. */
  steps: number;
}

interface Row {
  req: GenerationRequest;
  rand: () => number;
  out: number[];
  logprobs: number[];
  done: boolean;
  finish: GenerationFinish;
  stoppedBy?: string;
  text?: string;
  emitted: number;
  maxTokens: number;
  stop: string[];
  params: SamplingParams;
}

/**
 * Samples continuations for a batch of prompts (token ids) and returns one Generation per prompt, in order.
 * `stats`, when given, receives the prefix length and step count.
 */
export async function generate(model: CausalLM, prompts: (number[] | GenerationRequest)[], opts: GenerateOptions = {}, stats?: GenerateStats): Promise<Generation[]> {
  const reqs: GenerationRequest[] = prompts.map((p) => (Array.isArray(p) ? { ids: p } : p));
  if (reqs.length === 0) return [];
  for (const r of reqs) if (r.ids.length === 0) throw new T2sError("usage", "every prompt needs at least one token");
  const tok = model.tokenizer;
  const eos = new Set(opts.eosIds ?? (tok ? tok.eosIds : model.config.eosTokenIds));
  const paramsOf = (r: GenerationRequest): SamplingParams => {
    const p = { temperature: r.temperature ?? opts.temperature ?? 1, topP: r.topP ?? opts.topP ?? 1, topK: r.topK ?? opts.topK ?? 0 };
    if (!(p.temperature >= 0) || !(p.topP > 0 && p.topP <= 1) || !(p.topK >= 0)) throw new T2sError("usage", "temperature must be >= 0, top_p in (0, 1], top_k >= 0");
    return p;
  };
  const maxPos = model.config.maxPositions;
  const rows: Row[] = reqs.map((r, i) => ({
    req: r,
    rand: sequenceRandom(r.seed ?? opts.seed ?? 0, r.sampleIndex ?? i),
    out: [],
    logprobs: [],
    done: false,
    finish: "length",
    emitted: 0,
    maxTokens: Math.max(0, Math.min(r.maxTokens ?? opts.maxTokens ?? 256, maxPos - r.ids.length)),
    stop: (r.stop ?? opts.stop ?? []).filter((s) => s.length > 0),
    params: paramsOf(r),
  }));
  const decode = (ids: number[]) => (tok && ids.length ? tok.decode(ids, { skipSpecialTokens: true }) : "");
  const stepOpts = { lastOnly: true, adapter: opts.adapter ?? null };

  let cache: KvCache | null = null;
  let logits: tf.Tensor | null = null;
  let prefix = 0;
  let steps = 0;
  try {
    const live = rows.filter((r) => r.maxTokens > 0);
    for (const r of rows) if (r.maxTokens === 0) r.done = true;
    let active = live.map((r) => rows.indexOf(r));
    if (active.length) {
      const ids = active.map((i) => rows[i].req.ids);
      if (opts.sharePrefix !== false && ids.length > 1) prefix = Math.min(commonPrefix(ids), Math.min(...ids.map((x) => x.length)) - 1);
      if (prefix > 0) {
        const p = ids[0].slice(0, prefix);
        const first = model.step({ ids: [p], positions: [p.map((_, i) => i)], valid: [p.map(() => true)] }, null, stepOpts);
        first.logits.dispose();
        // every row attends to the one batch-1 prefix; nothing is tiled per row
        cache = shareCache(first.cache, active.length);
        disposeCache(first.cache);
      }
      const suffixes = ids.map((x) => x.slice(prefix));
      const L = Math.max(...suffixes.map((s) => s.length));
      const pad = model.config.padTokenId ?? tok?.padId ?? 0;
      const input = {
        ids: suffixes.map((s) => [...new Array<number>(L - s.length).fill(pad), ...s]),
        positions: suffixes.map((s) => Array.from({ length: L }, (_, i) => Math.max(0, prefix + i - (L - s.length)))),
        valid: suffixes.map((s) => Array.from({ length: L }, (_, i) => i >= L - s.length)),
      };
      const r0 = model.step(input, cache, stepOpts);
      disposeCache(cache);
      cache = r0.cache;
      logits = r0.logits;
    }
    while (active.length) {
      const data = (await logits!.data()) as Float32Array;
      const V = model.config.vocabSize;
      const keep: number[] = [];
      active.forEach((rowIdx, a) => {
        const row = rows[rowIdx];
        const { id, logprob } = sampleToken(data.subarray(a * V, (a + 1) * V), row.params, row.rand);
        row.out.push(id);
        row.logprobs.push(logprob);
        if (eos.has(id)) finish(row, "stop", "eos");
        else if (row.stop.length && checkStop(row, decode)) {
          // finish() was called by checkStop
        } else if (row.out.length >= row.maxTokens) finish(row, "length");
        if (opts.onText) emit(row, rowIdx, decode, opts.onText);
        if (!row.done) keep.push(a);
      });
      if (keep.length === 0) break;
      if (keep.length < active.length) {
        const smaller = selectCacheRows(cache!, keep);
        disposeCache(cache);
        cache = smaller;
        active = keep.map((a) => active[a]);
      }
      const next = model.step(
        {
          ids: active.map((i) => [rows[i].out[rows[i].out.length - 1]]),
          positions: active.map((i) => [rows[i].req.ids.length + rows[i].out.length - 1]),
          valid: active.map(() => [true]),
        },
        cache,
        stepOpts,
      );
      disposeCache(cache);
      logits!.dispose();
      cache = next.cache;
      logits = next.logits;
      steps++;
    }
  } finally {
    disposeCache(cache);
    logits?.dispose();
  }
  if (stats) {
    stats.prefixTokens = prefix;
    stats.steps = steps;
  }
  return rows.map((row, i) => {
    const text = row.text ?? decode(row.stoppedBy === "eos" ? row.out.slice(0, -1) : row.out);
    if (opts.onText && text.length > row.emitted) opts.onText(i, text.slice(row.emitted));
    return { ids: row.out, text, logprobs: row.logprobs, finishReason: row.finish, stoppedBy: row.stoppedBy, promptTokens: row.req.ids.length };
  });
}

function finish(row: Row, reason: GenerationFinish, by?: string): void {
  row.done = true;
  row.finish = reason;
  row.stoppedBy = by;
}

/** Finishes the row when its text now contains one of its stop strings; the text is cut before it. */
function checkStop(row: Row, decode: (ids: number[]) => string): boolean {
  const longest = Math.max(...row.stop.map((s) => s.length));
  const tail = decode(row.out.slice(-(2 * longest + 4)));
  if (!row.stop.some((s) => tail.includes(s))) return false;
  const full = decode(row.out);
  let at = -1;
  let by = "";
  for (const s of row.stop) {
    const i = full.indexOf(s);
    if (i >= 0 && (at < 0 || i < at)) {
      at = i;
      by = s;
    }
  }
  if (at < 0) return false;
  row.text = full.slice(0, at);
  finish(row, "stop", by);
  return true;
}

function emit(row: Row, rowIdx: number, decode: (ids: number[]) => string, onText: (row: number, delta: string) => void): void {
  if (row.done) return; // the final text is flushed once, after the loop
  let text = decode(row.out);
  // hold back an unfinished UTF-8 character and anything that could still become a stop string
  while (text.endsWith("\uFFFD")) text = text.slice(0, -1);
  const hold = row.stop.length ? Math.max(...row.stop.map((s) => s.length)) - 1 : 0;
  const safe = text.length - hold;
  if (safe > row.emitted) {
    onText(rowIdx, text.slice(row.emitted, safe));
    row.emitted = safe;
  }
}
