/**
 * POST /v1/chat/completions. Streaming sends each engine step's new text as it is made. With tools
 * (tool_choice auto) the text goes through a ToolCallStream: content flows until a `<tool_call>` may be
 * starting, and each block goes out as one tool-call delta when it closes. When tool_choice forces a call
 * (required or a named function) the whole reply is that call, sent as a tool-call delta when it ends.
 */
import type { FastifyReply } from "fastify";
import type { ChatChoice, ChatEngine } from "../model/chat.js";
import type { ServedModel } from "../model/served-model.js";
import { newId, ToolCallStream, type ToolStreamEvent } from "../model/toolcalls.js";
import type { ServeMetrics } from "./metrics.js";
import { asRequestError } from "./errors.js";
import { chunkBody, completionBody, errorBody, logprobsContent, parseChatBody, requestObject, toolCallsDelta, usageBody } from "./protocol.js";
import { disconnectSignal, EventStream } from "./sse.js";
import { checkGuide, type Guide } from "../model/guided.js";
import { isT2sError } from "../core/errors.js";
import { RequestError } from "./params.js";
import { checkRequestSize, type RequestLimits } from "./limits.js";

export interface ServeContext {
  chat: ChatEngine;
  metrics: ServeMetrics;
  /** Tokenizes a prompt of a served model off the event loop, behind the byte bound. */
  encode(model: ServedModel, text: string, addSpecialTokens: boolean): Promise<number[]>;
  /** Throws context_length_exceeded when `bytes` of text cannot fit the model's context (before any rendering). */
  checkBytes(model: ServedModel, bytes: number): void;
  /** Which logprobs requests report (the server's --logprobs-mode). */
  logprobsMode: "raw" | "processed";
  /** How much one request may ask for (prompts, sequences). */
  limits: RequestLimits;
}

/**
 * A request's guide checked before any header goes out: a schema the grammar engine must not or cannot
 * take, or one past a guided-decoding limit, is a 400 naming `param` (and the limit); a grammar engine that
 * failed to start is a 503. A check still queued when its client leaves is dropped.
 */
export async function checkRequestGuide(model: ServedModel, guide: Guide, param: string, signal: AbortSignal): Promise<void> {
  try {
    await checkGuide(model.requireTokenizer(), model.config.vocabSize, guide, { signal });
  } catch (e) {
    if (isT2sError(e, "usage") || isT2sError(e, "guided_limit")) throw new RequestError(400, e.message, { param, code: e.code === "guided_limit" ? "guided_limit" : undefined });
    if (isT2sError(e, "guided_unavailable")) throw new RequestError(503, e.message, { code: e.code });
    throw e;
  }
}

/** The outcome a failed request is counted under. */
export function failure(signal: AbortSignal): string[] {
  return [signal.aborted ? "cancelled" : "error"];
}

export async function chatCompletions(ctx: ServeContext, raw: unknown, reply: FastifyReply): Promise<unknown> {
  const started = performance.now();
  const seconds = () => (performance.now() - started) / 1000;
  const model = ctx.chat.model(requestObject(raw).model);
  const req = { ...parseChatBody(raw, model.config.vocabSize), logprobsMode: ctx.logprobsMode };
  checkRequestSize(1, req.n ?? 1, ctx.limits);
  ctx.checkBytes(model, req.messages.reduce((n, m) => n + Buffer.byteLength(m.content ?? "") + Buffer.byteLength(JSON.stringify(m.tool_calls ?? "")), 0));
  const tok = model.requireTokenizer();
  const signal = disconnectSignal(reply);
  // a schema the grammar engine cannot use is a 400, found before any header goes out
  const guide = ctx.chat.guideOf(req);
  if (guide) await checkRequestGuide(model, guide, req.toolChoice && req.toolChoice !== "auto" ? "tools" : "response_format", signal);
  // vLLM's return_tokens_as_token_ids: logprob entries name tokens as "token_id:<id>"
  const tokenText = (raw as { return_tokens_as_token_ids?: unknown }).return_tokens_as_token_ids === true ? (t: number) => `token_id:${t}` : (t: number) => tok.decode([t]);
  const id = newId("chatcmpl");
  const created = Math.floor(Date.now() / 1000);
  if (!req.stream) {
    try {
      let first: number | undefined;
      const result = await ctx.chat.complete(req, { signal, onDelta: () => (first ??= seconds()) });
      ctx.metrics.record({ model: req.model, seconds: seconds(), firstTokenSeconds: first, outputTokens: result.completionTokens, outcome: result.choices.map((c) => c.finishReason) });
      return completionBody(id, created, result, req.logprobs ? tokenText : undefined);
    } catch (e) {
      ctx.metrics.record({ model: req.model, seconds: seconds(), outcome: failure(signal) });
      throw e;
    }
  }
  // everything that can be a 400 is checked before the 200 header goes out
  ctx.chat.newTokenBudget(req.model, (await ctx.chat.promptIdsAsync(req)).length, req);
  const mode = !req.tools?.length || req.toolChoice === "none" ? "plain" : req.toolChoice === undefined || req.toolChoice === "auto" ? "auto" : "forced";
  const stream = new EventStream(reply);
  const n = req.n ?? 1;
  const splitters = Array.from({ length: n }, () => new ToolCallStream());
  const callsSent = new Array<number>(n).fill(0);
  let firstToken: number | undefined;
  const promptTokens = (await ctx.chat.promptIdsAsync(req)).length;
  let generated = 0;
  const send = (i: number, delta: Record<string, unknown>, finish: string | null = null, lp?: Record<string, unknown>[]) => {
    const body = chunkBody(id, created, req.model, i, delta, finish, lp);
    // continuous_usage_stats: the usage so far on every chunk
    if (req.continuousUsage) body.usage = { prompt_tokens: promptTokens, completion_tokens: generated, total_tokens: promptTokens + generated };
    stream.send(body);
  };
  const sendEvents = (i: number, events: ToolStreamEvent[], lp?: Record<string, unknown>[]) => {
    for (const ev of events) {
      if ("content" in ev) send(i, { content: ev.content }, null, lp);
      else send(i, toolCallsDelta([ev.call], callsSent[i]++), null, lp);
      lp = undefined;
    }
    if (lp) send(i, {}, null, lp);
  };
  for (let i = 0; i < n; i++) send(i, { role: "assistant", content: "" });
  try {
    const result = await ctx.chat.complete(req, {
      signal,
      onDelta: (i, d) => {
        firstToken ??= seconds();
        generated += d.ids.length;
        const lp = req.logprobs ? logprobsContent(d.ids, d.logprobs, d.top, tokenText) : undefined;
        if (mode === "plain") {
          if (d.text || lp) send(i, { content: d.text }, null, lp);
        } else if (mode === "auto") sendEvents(i, splitters[i].push(d.text), lp);
        else if (lp) send(i, {}, null, lp);
      },
      onChoice: (c: ChatChoice) => {
        if (mode === "auto") sendEvents(c.index, splitters[c.index].end());
        if (mode === "forced") send(c.index, toolCallsDelta(c.toolCalls));
        send(c.index, {}, c.finishReason);
      },
    });
    if (req.includeUsage) stream.send({ id, object: "chat.completion.chunk", created, model: req.model, choices: [], usage: usageBody(result) });
    ctx.metrics.record({ model: req.model, seconds: seconds(), firstTokenSeconds: firstToken, outputTokens: result.completionTokens, outcome: result.choices.map((c) => c.finishReason) });
  } catch (e) {
    ctx.metrics.record({ model: req.model, seconds: seconds(), outcome: failure(signal) });
    if (!signal.aborted) stream.send(errorBody(asRequestError(e)));
  }
  stream.end();
  return reply;
}
