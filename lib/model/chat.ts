/**
 * The chat layer over the models: OpenAI-style messages (+ tools) -> chat template -> token ids -> the
 * generation engine (continuous batching, lib/model/engine/) -> choices with hermes tool calls parsed. The
 * HTTP server, the in-process `tfjs:` policy and the GRPO sampler all use it, so they serve exactly the
 * same prompts through one sampling path.
 */
import { randomInt } from "node:crypto";
import { T2sError } from "../core/errors.js";
import { GenerationEngine } from "./engine/generation-engine.js";
import { emptyEngineMetrics, type EngineMetrics, type EngineOptions } from "./engine/types.js";
import type { Generation, SamplingSettings, TokenDelta } from "./engine/types.js";
import type { CausalLM } from "./model.js";
import type { SequenceEngine, ServedModel } from "./served-model.js";
import { commonPrefix } from "./prefix.js";
import { guideConstraint, type Guide } from "./guided.js";
import { GUIDED_CALL_PREFILL, parseForcedToolCalls, parseToolCalls, TOOL_CALL_CLOSE, TOOL_CALL_OPEN, toolCallSchema, toolSchemas } from "./toolcalls.js";
import type { ChatChoice, ChatEngineOptions, ChatHooks, ChatRequest, ChatResult, IdsResult, PromptPart, SamplingRequest } from "./chat-types.js";
import { guidedCall, renderChat } from "./chat-prompt.js";

export type { ChatChoice, ChatEngineOptions, ChatHooks, ChatMessage, ChatRequest, ToolCall, ChatResult, IdsResult, PromptPart, SamplingRequest, ToolChoice } from "./chat-types.js";
export { renderChat } from "./chat-prompt.js";

/** Rendered prompts kept (a GRPO step has prompts_per_step distinct ones, an eval a few hundred). */
const RENDERED_PROMPTS = 1024;

const COUNTERS = ["steps", "promptTokens", "generatedTokens", "batchRows", "finished", "cancelled", "prefixCacheQueries", "prefixCacheHits"] as const;

/** The default engine factory: a GenerationEngine in this thread, over a model whose weights are here. */
function engineInThisThread(model: ServedModel, opts: EngineOptions): Promise<SequenceEngine> {
  if (!("weights" in model)) return Promise.reject(new T2sError("usage", `model ${model.name} has no weights in this thread; give ChatEngine an engine factory for it`));
  return GenerationEngine.create(model as CausalLM, opts);
}

export class ChatEngine {
  readonly models = new Map<string, ServedModel>();
  /** The base model's served name. */
  readonly baseName: string;
  private readonly engines = new Map<string, Promise<SequenceEngine>>();
  private readonly ready = new Map<string, SequenceEngine>();
  /** Prompt-prefix lengths by the system part they were measured on. */
  private readonly prefixes = new Map<string, number>();
  /** Token ids of recently rendered prompts, least recently used first. */
  private readonly rendered = new Map<string, number[]>();
  /** Counters of the engines of removed models, so the totals never go down. */
  private readonly retired: EngineMetrics = emptyEngineMetrics();

  constructor(base: ServedModel, adapters: ServedModel[] = [], private readonly opts: ChatEngineOptions = {}) {
    this.baseName = base.name;
    for (const m of [base, ...adapters]) this.addModel(m);
  }

  /** Serves one more model (a merged adapter) under its name. */
  addModel(m: ServedModel): void {
    if (this.models.has(m.name)) throw new T2sError("usage", `two served models are named ${m.name}; give each adapter its own name`);
    m.requireTokenizer();
    if (!m.tokenizer!.hasChatTemplate) throw new T2sError("no_chat_template", `model ${m.name} has no chat template, so it cannot serve chat completions`);
    this.models.set(m.name, m);
  }

  /**
   * Stops serving a model: its engine is closed (what it had in flight is cancelled) and the model is
   * returned for the caller to dispose. The base model cannot be removed.
   */
  async removeModel(name: string): Promise<ServedModel> {
    const m = this.model(name);
    if (name === this.baseName) throw new T2sError("usage", `${name} is the base model; only added models can be removed`);
    this.models.delete(name);
    for (const k of [...this.prefixes.keys()]) if (k.startsWith(`${name}\u0000`)) this.prefixes.delete(k);
    const e = this.engines.get(name);
    this.engines.delete(name);
    if (e) {
      const engine = await e.catch(() => null);
      this.ready.delete(name);
      if (engine) {
        await engine.close();
        for (const k of COUNTERS) this.retired[k] += engine.metrics[k];
        this.retired.queueSeconds.sum += engine.metrics.queueSeconds.sum;
        this.retired.queueSeconds.count += engine.metrics.queueSeconds.count;
      }
    }
    return m;
  }

  /** Returns the served model, or throws T2sError("model_not_found"). */
  model(name: string): ServedModel {
    const m = this.models.get(name);
    if (!m) throw new T2sError("model_not_found", `model '${name}' is not served here; available: ${[...this.models.keys()].join(", ")}`);
    return m;
  }

  /** The served model's generation engine (made on first use). */
  engine(name: string): Promise<SequenceEngine> {
    const model = this.model(name);
    let e = this.engines.get(name);
    if (!e) {
      const made = (this.opts.engines ?? engineInThisThread)(model, { maxBatch: this.opts.maxBatch, adapter: this.opts.adapter, maxPrefillTokens: this.opts.maxPrefillTokens, maxLength: this.opts.maxLength, enablePrefixCaching: this.opts.enablePrefixCaching, prefixCacheTokens: this.opts.prefixCacheTokens });
      e = made;
      void made.then(
        (ready) => this.engines.get(name) === made && this.ready.set(name, ready),
        () => this.engines.get(name) === made && this.engines.delete(name),
      );
      this.engines.set(name, e);
    }
    return e;
  }

  /**
   * The prompt ids of a chat request: the chat template (with the tools unless tool_choice is "none") and
   * the generation prompt, then, when tool_choice forces a call, the opening of that call as if the
   * assistant had already written it.
   */
  promptIds(req: PromptPart): number[] {
    const hit = this.cachedIds(req);
    if (hit) return hit;
    const text = this.promptText(req);
    return this.keep(req, this.model(req.model).requireTokenizer().encode(text, { addSpecialTokens: req.addSpecialTokens === true }));
  }

  /** promptIds through the `tokenize` option (off the thread in the server). */
  async promptIdsAsync(req: PromptPart): Promise<number[]> {
    const hit = this.cachedIds(req);
    if (hit) return hit;
    const text = this.promptText(req);
    const add = req.addSpecialTokens === true;
    if (!this.opts.tokenize) return this.keep(req, this.model(req.model).requireTokenizer().encode(text, { addSpecialTokens: add }));
    return this.keep(req, await this.opts.tokenize(this.model(req.model), text, add));
  }

  private renderKey(req: PromptPart): string {
    const tools = req.toolChoice === "none" ? undefined : req.tools;
    return JSON.stringify([req.model, tools ?? null, req.toolChoice ?? null, req.messages, req.templateKwargs ?? null, req.addSpecialTokens === true]);
  }

  // a GRPO step samples each prompt G times and an eval k times: render and tokenize it once
  private cachedIds(req: PromptPart): number[] | undefined {
    const key = this.renderKey(req);
    const hit = this.rendered.get(key);
    if (!hit) return undefined;
    this.rendered.delete(key);
    this.rendered.set(key, hit);
    return hit.slice();
  }

  private keep(req: PromptPart, ids: number[]): number[] {
    this.rendered.set(this.renderKey(req), ids);
    if (this.rendered.size > RENDERED_PROMPTS) this.rendered.delete(this.rendered.keys().next().value as string);
    return ids.slice();
  }

  /** The chat template's text of a request with the generation prompt and the forced opening. */
  promptText(req: PromptPart): string {
    const tok = this.model(req.model).requireTokenizer();
    const tools = req.toolChoice === "none" ? undefined : req.tools;
    return renderChat(tok, req.messages, { tools, addGenerationPrompt: true, extra: req.templateKwargs }) + this.prefill(req);
  }

  /** The forced opening of the reply ("" unless tool_choice is required or a named function). */
  private prefill(req: Pick<ChatRequest, "tools" | "toolChoice">): string {
    if (!req.tools?.length || req.toolChoice === undefined || req.toolChoice === "none" || req.toolChoice === "auto") return "";
    return GUIDED_CALL_PREFILL;
  }

  /**
   * What guided decoding holds a chat reply to: a forced tool_choice, the call body of an offered tool (of
   * the named one); with tool_choice auto and a `strict` tool, free text whose calls follow their schemas;
   * otherwise the request's own guide (response_format), if any.
   */
  guideOf(req: Pick<ChatRequest, "tools" | "toolChoice" | "guide">): Guide | undefined {
    if (!req.tools?.length || req.toolChoice === "none") return req.guide;
    const tools = toolSchemas(req.tools);
    if (req.toolChoice !== undefined && req.toolChoice !== "auto") return { kind: "schema", schema: toolCallSchema(tools, req.toolChoice === "required" ? undefined : req.toolChoice.name) };
    if (req.guide) return req.guide;
    if (tools.some((t) => t.strict)) return { kind: "tool_tags", tools: tools.map((t) => ({ name: t.name, parameters: t.strict ? t.parameters : { type: "object" } })), begin: `${TOOL_CALL_OPEN}\n`, end: `\n${TOOL_CALL_CLOSE}` };
    return undefined;
  }

  /**
   * How many leading prompt tokens belong to the conversation's system part (the schema and notes), which
   * every request on that database shares: the common prefix of the prompt and the same system part
   * followed by a placeholder turn. A property of the request alone, so a row's arithmetic never depends on
   * what else is batched with it.
   */
  sharedPrefixLength(req: PromptPart, ids: number[]): number {
    const probe = this.prefixProbe(req);
    if (!probe) return 0;
    let n = this.prefixes.get(probe.key);
    if (n === undefined) n = this.keepPrefix(probe.key, this.promptIds(probe.req), ids);
    return Math.min(n, ids.length - 1);
  }

  /** sharedPrefixLength through the `tokenize` option. */
  async sharedPrefixLengthAsync(req: PromptPart, ids: number[]): Promise<number> {
    const probe = this.prefixProbe(req);
    if (!probe) return 0;
    let n = this.prefixes.get(probe.key);
    if (n === undefined) n = this.keepPrefix(probe.key, await this.promptIdsAsync(probe.req), ids);
    return Math.min(n, ids.length - 1);
  }

  private prefixProbe(req: PromptPart): { key: string; req: PromptPart } | null {
    const lead = req.messages.findIndex((m) => m.role !== "system");
    if (lead <= 0) return null;
    const tools = req.toolChoice === "none" ? undefined : req.tools;
    const key = `${req.model}\u0000${JSON.stringify(tools ?? null)}\u0000${JSON.stringify(req.messages.slice(0, lead))}\u0000${JSON.stringify(req.templateKwargs ?? null)}`;
    return { key, req: { model: req.model, tools, templateKwargs: req.templateKwargs, messages: [...req.messages.slice(0, lead), { role: "user", content: "\u0001" }] } };
  }

  private keepPrefix(key: string, probe: number[], ids: number[]): number {
    const n = commonPrefix([probe, ids]);
    if (this.prefixes.size > 256) this.prefixes.clear();
    this.prefixes.set(key, n);
    return n;
  }

  /** The new tokens a request may have after a prompt of `promptLength` tokens (throws when none, or too many asked with refuseOverlong). */
  newTokenBudget(name: string, promptLength: number, req: SamplingRequest): number {
    const model = this.model(name);
    const limit = model.config.maxPositions;
    const room = limit - promptLength;
    if (room <= 0) throw new T2sError("context_length_exceeded", `the prompt has ${promptLength} tokens but ${model.name} takes at most ${limit}`);
    if (req.refuseOverlong && req.maxTokens !== undefined && req.maxTokens > room) {
      throw new T2sError(
        "context_length_exceeded",
        `this model's maximum context length is ${limit} tokens, but ${promptLength + req.maxTokens} were requested (${promptLength} in the prompt, ${req.maxTokens} in the completion); reduce the prompt or max_tokens (at most ${room} here)`,
      );
    }
    return Math.min(req.maxTokens ?? room, room);
  }

  /**
   * Samples n continuations of a prompt given as token ids (rows seeded seed/0..n-1) on a served model's
   * engine. Hooks receive each step's tokens; aborting the signal cancels the rows.
   */
  async generateIds(name: string, ids: number[], req: SamplingRequest, hooks: Omit<ChatHooks, "onChoice"> & { onGeneration?: (i: number, g: Generation) => void } = {}, prefixLength = 0): Promise<IdsResult> {
    const model = this.model(name);
    const maxTokens = this.newTokenBudget(name, ids.length, req);
    const n = req.n ?? 1;
    const seed = req.seed ?? randomInt(0, 2 ** 31);
    const bias = req.logitBias ? Object.entries(req.logitBias).map(([id, b]) => [Number(id), b] as [number, number]) : undefined;
    const engine = await this.engine(name);
    const tok = model.requireTokenizer();
    const constraints = req.guide ? await Promise.all(Array.from({ length: n }, () => guideConstraint(tok, model.config.vocabSize, req.guide!))) : undefined;
    const generations = await Promise.all(
      Array.from({ length: n }, (_, i) =>
        engine
          .submit({
            constraint: constraints?.[i],
            ids,
            maxTokens,
            minTokens: req.minTokens,
            stop: req.stop,
            stopTokenIds: req.stopTokenIds,
            ignoreEos: req.ignoreEos,
            seed,
            sampleIndex: i,
            temperature: req.temperature ?? 1,
            topP: req.topP ?? 1,
            topK: req.topK ?? 0,
            logitBias: bias,
            presencePenalty: req.presencePenalty,
            frequencyPenalty: req.frequencyPenalty,
            topLogprobs: req.topLogprobs,
            logprobsMode: req.logprobsMode,
            includeStopStr: req.includeStopStr,
            skipSpecialTokens: req.skipSpecialTokens,
            prefixLength,
            signal: hooks.signal,
            onDelta:
              hooks.onText || hooks.onDelta
                ? (d) => {
                    hooks.onDelta?.(i, d);
                    if (d.text) hooks.onText?.(i, d.text);
                  }
                : undefined,
          })
          .then(
            (g) => {
              hooks.onGeneration?.(i, g);
              return g;
            },
            (e: unknown) => {
              // a sequence refused before it ran still holds its grammar matcher (WASM memory)
              constraints?.[i]?.dispose();
              throw e;
            },
          ),
      ),
    );
    return { model: model.name, promptIds: ids, generations };
  }

  /**
   * Runs a chat request through the served model's engine and returns its choices (n rows, seeds
   * seed/0..n-1). Hooks receive text and tokens as they are made; aborting the signal cancels the rows.
   */
  async complete(req: ChatRequest, hooks: ChatHooks = {}): Promise<ChatResult> {
    const whole = await this.promptIdsAsync(req);
    const ids = req.truncatePromptTokens !== undefined && whole.length > req.truncatePromptTokens ? whole.slice(-req.truncatePromptTokens) : whole;
    const prefill = this.prefill(req);
    const guide = this.guideOf(req);
    const parse = req.tools?.length && req.toolChoice !== "none";
    const choiceOf = (i: number, g: Generation): ChatChoice => {
      const text = prefill + g.text;
      // a guided call that completed is one JSON object (its strings may hold any text, `</tool_call>` too)
      const guided = prefill && g.stoppedBy === "grammar" ? guidedCall(g.text) : null;
      const parsed = guided ?? (!parse ? { content: g.text, calls: [], invalid: 0 } : prefill ? parseForcedToolCalls(text, req.toolChoice === "required" ? undefined : (req.toolChoice as { name: string }).name) : parseToolCalls(text));
      // a reply cut by max_tokens is "length" whatever it holds (OpenAI's contract), a cut tool call included
      const finishReason = g.finishReason === "length" ? "length" : parsed.calls.length ? "tool_calls" : g.finishReason;
      return { index: i, text, content: parsed.content, toolCalls: parsed.calls, invalidToolCalls: parsed.invalid, finishReason, ids: g.ids, logprobs: g.logprobs, topLogprobs: g.topLogprobs };
    };
    const choices: ChatChoice[] = [];
    const r = await this.generateIds(req.model, ids, { ...req, guide }, { ...hooks, onGeneration: (i, g) => {
      choices[i] = choiceOf(i, g);
      hooks.onChoice?.(choices[i]);
    } }, ids === whole ? await this.sharedPrefixLengthAsync(req, ids) : 0);
    return { model: r.model, promptTokens: ids.length, promptIds: ids, completionTokens: r.generations.reduce((s, g) => s + g.ids.length, 0), choices };
  }

  /** Sequences running and waiting now, over the served models whose engines have started. */
  load(): { running: number; waiting: number } {
    const out = { running: 0, waiting: 0 };
    for (const e of this.ready.values()) {
      out.running += e.load.running;
      out.waiting += e.load.waiting;
    }
    return out;
  }

  /** Running and waiting sequences and the engines' counters, summed over the served models (removed ones included). */
  metrics(): EngineMetrics {
    const total: EngineMetrics = { ...this.retired, ...this.load(), queueSeconds: { ...this.retired.queueSeconds } };
    for (const e of this.ready.values()) {
      for (const k of COUNTERS) total[k] += e.metrics[k];
      total.queueSeconds.sum += e.metrics.queueSeconds.sum;
      total.queueSeconds.count += e.metrics.queueSeconds.count;
    }
    return total;
  }

  /** KV-cache usage over the started engines: token slots held / token slots there are. */
  cacheUsage(): number {
    const engines = [...this.ready.values()];
    return engines.length ? engines.reduce((s, e) => s + e.cacheUsage(), 0) / engines.length : 0;
  }

  /** The served weights changed (a training step): engines drop what they derived from the old ones. */
  weightsChanged(): void {
    for (const e of this.ready.values()) e.weightsChanged();
  }

  /** Cancels what is in flight and frees the engines. */
  async close(): Promise<void> {
    // an engine that never started has nothing to close
    for (const e of this.engines.values()) await (await e.catch(() => null))?.close();
    this.engines.clear();
    this.ready.clear();
  }
}
