/**
 * POST /v1/completions: plain-text completions of a prompt given as a string, a list of strings, token
 * ids, or a list of token-id lists (vLLM's forms), with n, stream, echo, and `logprobs` as a count of top
 * tokens per position. No chat template is applied.
 */
import type { FastifyReply } from "fastify";
import type { SamplingRequest } from "../model/chat.js";
import type { Generation } from "../model/engine/types.js";
import type { ServedModel } from "../model/served-model.js";
import { rawLogprob, topLogprobs } from "../model/sampler.js";
import type { ChatTokenizer } from "../model/tokenizer.js";
import { checkRequestGuide, failure, type ServeContext } from "./chat-route.js";
import { asRequestError } from "./errors.js";
import { bad, optNumber, parseSampling, refuseUnsupported, SAMPLING_KEYS, type StreamOptions } from "./params.js";
import { newId } from "../model/toolcalls.js";
import { errorBody, requestObject } from "./protocol.js";
import { disconnectSignal, EventStream } from "./sse.js";
import { checkRequestSize, REQUEST_LIMITS, type RequestLimits } from "./limits.js";
import { T2sError } from "../core/errors.js";

const COMPLETION_KEYS = new Set([...SAMPLING_KEYS, "prompt", "echo", "best_of", "add_special_tokens"]);

/**
 * Sequences a request hands the engine per turn of the event loop: a request of thousands of rows joins
 * the line over several turns, with /health and the streams answered in between (each row's tokens depend
 * on its seed alone, never on which step it joined).
 */
const ROWS_PER_TURN = 256;

/** For each of `count` prompts of `n` rows, a gate that opens once the prompts before it had their turns. */
function promptGates(count: number, n: number): Promise<void>[] {
  const perTurn = Math.max(1, Math.floor(ROWS_PER_TURN / n));
  const gates: Promise<void>[] = [];
  let gate = Promise.resolve();
  for (let i = 0; i < count; i++) {
    if (i > 0 && i % perTurn === 0) gate = gate.then(() => new Promise<void>((resolve) => setImmediate(resolve)));
    gates.push(gate);
  }
  return gates;
}

interface Prompt {
  ids: number[];
  /** What echo prepends. */
  text: string;
}

/** Tokenizes one prompt text (the server's worker pool). */
export type Encode = (text: string, addSpecialTokens: boolean) => Promise<number[]>;

interface CompletionRequest extends SamplingRequest, StreamOptions {
  model: string;
  prompts: Prompt[];
  echo: boolean;
}

function isIds(v: unknown): v is number[] {
  return Array.isArray(v) && v.length > 0 && v.every((x) => typeof x === "number");
}

/** The request a completions body describes, or a 400 naming the first bad field or the limit it passes. */
export async function parseCompletionBody(raw: unknown, tok: ChatTokenizer, vocab: number, encode: Encode = async (t, add) => tok.encode(t, { addSpecialTokens: add }), limits: RequestLimits = REQUEST_LIMITS): Promise<CompletionRequest> {
  const body = requestObject(raw);
  refuseUnsupported(body, COMPLETION_KEYS);
  const p = body.prompt;
  // the number of prompts is bounded before any of them is read
  checkRequestSize(Array.isArray(p) && !isIds(p) ? p.length : 1, 1, limits);
  const addSpecial = body.add_special_tokens !== false;
  const texts: string[] = [];
  const fromText = (t: string): Prompt => {
    texts.push(t);
    return { ids: [], text: t };
  };
  const fromIds = (ids: number[]): Prompt => {
    if (ids.some((id) => !Number.isInteger(id) || id < 0 || id >= vocab)) throw bad("prompt", `token ids in 'prompt' must be integers in [0, ${vocab})`);
    return { ids, text: tok.decode(ids, { skipSpecialTokens: false }) };
  };
  let prompts: Prompt[];
  if (typeof p === "string") prompts = [fromText(p)];
  else if (isIds(p)) prompts = [fromIds(p)];
  else if (Array.isArray(p) && p.length > 0 && p.every((x) => typeof x === "string")) prompts = (p as string[]).map(fromText);
  else if (Array.isArray(p) && p.length > 0 && p.every(isIds)) prompts = (p as number[][]).map(fromIds);
  else throw bad("prompt", "'prompt' must be a string, a list of strings, a list of token ids, or a list of token-id lists");
  const sampling = parseSampling(body, vocab);
  checkRequestSize(prompts.length, sampling.n ?? 1, limits);
  // every field is checked before the prompts are tokenized (off the event loop, behind the byte bound)
  if (texts.length) {
    const ids = await Promise.all(texts.map((t) => encode(t, addSpecial)));
    prompts.forEach((x, i) => (x.ids = ids[i]));
  }
  const truncate = optNumber(body, "truncate_prompt_tokens", 1, 1e9, true);
  if (truncate !== undefined) for (const x of prompts) x.ids = x.ids.slice(-truncate);
  if (prompts.some((x) => x.ids.length === 0)) throw bad("prompt", "every prompt needs at least one token");
  const logprobs = optNumber(body, "logprobs", 0, 20, true);
  const echo = body.echo === true;
  const bestOf = optNumber(body, "best_of", 1, 64, true);
  if (bestOf !== undefined && bestOf !== (sampling.n ?? 1)) throw bad("best_of", `'best_of' = ${bestOf} is not supported (only best_of = n: every sampled row is returned)`);
  // the completions protocol's default is 16 new tokens
  return { ...sampling, maxTokens: sampling.maxTokens ?? 16, topLogprobs: logprobs, model: body.model, prompts, echo };
}

type Row = { ids: number[]; logprobs: (number | null)[]; top?: ({ id: number; logprob: number }[] | null)[] };

/**
 * The prompt's own log-probabilities (echo with logprobs: lm-eval's log-likelihood scoring): each token's
 * raw log_softmax under the tokens before it, null for the first, with the `top` most likely at each
 * position. One forward pass over the prompt, outside the engine.
 */
async function promptLogprobs(model: ServedModel, ids: number[], top: number): Promise<Row> {
  const rows = await model.logitsOf(ids);
  const logprobs: (number | null)[] = [null];
  const tops: ({ id: number; logprob: number }[] | null)[] = [null];
  for (let i = 1; i < ids.length; i++) {
    logprobs.push(rawLogprob(rows[i - 1], ids[i]));
    tops.push(top > 0 ? topLogprobs(rows[i - 1], 1, top) : []);
  }
  return { ids, logprobs, top: tops };
}

function joinRows(a: Row, b: Row): Row {
  return { ids: [...a.ids, ...b.ids], logprobs: [...a.logprobs, ...b.logprobs], top: [...(a.top ?? a.ids.map(() => [])), ...(b.top ?? b.ids.map(() => []))] };
}

/** The OpenAI completions `logprobs` object of sampled tokens, offsets counted from `offset`. */
function logprobsBody(row: Row, tokenText: (id: number) => string, offset: number): Record<string, unknown> {
  const tokens = row.ids.map(tokenText);
  const textOffset: number[] = [];
  for (const t of tokens) {
    textOffset.push(offset);
    offset += t.length;
  }
  return {
    tokens,
    token_logprobs: row.logprobs,
    top_logprobs: row.top ? row.top.map((step) => (step ? Object.fromEntries(step.map((t) => [tokenText(t.id), t.logprob])) : null)) : null,
    text_offset: textOffset,
  };
}

export async function completions(ctx: ServeContext, raw: unknown, reply: FastifyReply): Promise<unknown> {
  const started = performance.now();
  const seconds = () => (performance.now() - started) / 1000;
  const model = ctx.chat.model(requestObject(raw).model);
  const tok = model.requireTokenizer();
  const req = { ...(await parseCompletionBody(raw, tok, model.config.vocabSize, (t, add) => ctx.encode(model, t, add), ctx.limits)), logprobsMode: ctx.logprobsMode };
  for (const p of req.prompts) ctx.chat.newTokenBudget(req.model, p.ids.length, req);
  const signal = disconnectSignal(reply);
  if (req.guide) await checkRequestGuide(model, req.guide, "response_format", signal);
  const tokenText = (raw as { return_tokens_as_token_ids?: unknown }).return_tokens_as_token_ids === true ? (t: number) => `token_id:${t}` : (t: number) => tok.decode([t]);
  const n = req.n ?? 1;
  const id = newId("cmpl");
  const created = Math.floor(Date.now() / 1000);
  const wantLogprobs = req.topLogprobs !== undefined;
  const usage = (gens: Generation[][]) => {
    const prompt = req.prompts.reduce((s, p) => s + p.ids.length, 0);
    const completion = gens.flat().reduce((s, g) => s + g.ids.length, 0);
    return { prompt_tokens: prompt, completion_tokens: completion, total_tokens: prompt + completion };
  };
  const stream = req.stream ? new EventStream(reply) : null;
  const promptTokens = req.prompts.reduce((s, p) => s + p.ids.length, 0);
  let generated = 0;
  const chunk = (index: number, text: string, finish: string | null, logprobs: Record<string, unknown> | null = null) =>
    stream!.send({ id, object: "text_completion", created, model: req.model, choices: [{ index, text, logprobs, finish_reason: finish }], ...(req.continuousUsage ? { usage: { prompt_tokens: promptTokens, completion_tokens: generated, total_tokens: promptTokens + generated } } : {}) });
  let firstToken: number | undefined;
  const offsets = new Array<number>(req.prompts.length * n).fill(0);
  try {
    const echoed = req.echo && wantLogprobs ? await Promise.all(req.prompts.map((p) => promptLogprobs(model, p.ids, req.topLogprobs ?? 0))) : null;
    if (stream && req.echo) req.prompts.forEach((p, pi) => Array.from({ length: n }, (_, i) => chunk(pi * n + i, p.text, null, echoed ? logprobsBody(echoed[pi], tokenText, 0) : null)));
    if (echoed) offsets.forEach((_, k) => (offsets[k] = req.prompts[Math.floor(k / n)].text.length));
    const gates = promptGates(req.prompts.length, n);
    const gens = await Promise.all(
      req.prompts.map(async (p, pi) => {
        await gates[pi];
        if (signal.aborted) throw new T2sError("cancelled", "the client went away");
        const r = await ctx.chat.generateIds(req.model, p.ids, { ...req, topLogprobs: req.topLogprobs || undefined }, {
          signal,
          onDelta: stream
            ? (i, d) => {
                firstToken ??= seconds();
                generated += d.ids.length;
                const index = pi * n + i;
                const lp = wantLogprobs ? logprobsBody({ ids: d.ids, logprobs: d.logprobs, top: d.top }, tokenText, offsets[index]) : null;
                offsets[index] += d.ids.map(tokenText).join("").length;
                if (d.text || lp) chunk(index, d.text, null, lp);
              }
            : () => (firstToken ??= seconds()),
          onGeneration: stream ? (i, g) => chunk(pi * n + i, "", g.finishReason) : undefined,
        });
        return r.generations;
      }),
    );
    ctx.metrics.record({ model: req.model, seconds: seconds(), firstTokenSeconds: firstToken, outputTokens: gens.flat().reduce((n, g) => n + g.ids.length, 0), outcome: gens.flat().map((g) => g.finishReason) });
    if (stream) {
      if (req.includeUsage) stream.send({ id, object: "text_completion", created, model: req.model, choices: [], usage: usage(gens) });
      stream.end();
      return reply;
    }
    return {
      id,
      object: "text_completion",
      created,
      model: req.model,
      choices: gens.flatMap((rows, pi) =>
        rows.map((g, i) => {
          const lead = req.echo ? req.prompts[pi].text : "";
          const own: Row = { ids: g.ids, logprobs: g.logprobs, top: g.topLogprobs };
          const lp = !wantLogprobs ? null : echoed ? logprobsBody(joinRows(echoed[pi], own), tokenText, 0) : logprobsBody(own, tokenText, lead.length);
          return { index: pi * n + i, text: lead + g.text, logprobs: lp, finish_reason: g.finishReason };
        }),
      ),
      usage: usage(gens),
    };
  } catch (e) {
    ctx.metrics.record({ model: req.model, seconds: seconds(), outcome: failure(signal) });
    if (!stream) throw e;
    if (!signal.aborted) stream.send(errorBody(asRequestError(e)));
    stream.end();
    return reply;
  }
}
