/**
 * The chat layer over the models: OpenAI-style messages (+ tools) -> chat template -> token ids -> the
 * generation engine (continuous batching, lib/model/engine/) -> choices with hermes tool calls parsed. The
 * HTTP server, the in-process `tfjs:` policy and the GRPO sampler all use it, so they serve exactly the
 * same prompts through one sampling path.
 */
import { randomInt } from "node:crypto";
import { T2sError } from "../errors.js";
import { GenerationEngine, type EngineMetrics } from "./engine/scheduler.js";
import type { Generation, TokenDelta } from "./engine/types.js";
import type { CausalLM } from "./model.js";
import { commonPrefix } from "./prefix.js";
import type { TemplateMessage } from "./tokenizer.js";
import { parseToolCalls, type ParsedToolCall } from "./toolcalls.js";

export interface ChatMessageIn {
  role: string;
  content: string | null;
  tool_calls?: { id?: string; type?: string; function: { name: string; arguments: string | Record<string, unknown> } }[];
  tool_call_id?: string;
  name?: string;
}

/** A chat request in the engine's terms (the HTTP layer maps OpenAI/vLLM bodies onto it). */
export interface ChatRequest {
  model: string;
  messages: ChatMessageIn[];
  tools?: unknown[];
  n?: number;
  temperature?: number;
  topP?: number;
  topK?: number;
  maxTokens?: number;
  minTokens?: number;
  stop?: string[];
  stopTokenIds?: number[];
  ignoreEos?: boolean;
  seed?: number;
  logitBias?: Record<string, number>;
  presencePenalty?: number;
  frequencyPenalty?: number;
  topLogprobs?: number;
}

export interface ChatChoice {
  index: number;
  text: string;
  content: string | null;
  toolCalls: ParsedToolCall[];
  invalidToolCalls: number;
  finishReason: "stop" | "length" | "tool_calls";
  ids: number[];
  logprobs: number[];
  topLogprobs?: { id: number; logprob: number }[][];
}

export interface ChatResult {
  model: string;
  promptTokens: number;
  /** The prompt as token ids (the chat template's rendering with the generation prompt). */
  promptIds: number[];
  completionTokens: number;
  choices: ChatChoice[];
}

export interface ChatHooks {
  /** Content pieces of each choice as they are sampled (safe to show; they concatenate to the text). */
  onText?: (choice: number, delta: string) => void;
  /** Every step's new tokens of each choice. */
  onDelta?: (choice: number, delta: TokenDelta) => void;
  /** Aborting cancels every choice at the next step. */
  signal?: AbortSignal;
}

export interface ChatEngineOptions {
  /** Sequences decoded together per served model (default 64). */
  maxBatch?: number;
  /** Unmerged adapter applied to every request (the trainer samples the adapter it trains). */
  adapter?: string | null;
}

/** Tool call arguments arrive as JSON text; templates expect objects, so parse what parses. */
export function templateMessages(messages: ChatMessageIn[]): TemplateMessage[] {
  return messages.map((m) => {
    const out: TemplateMessage = { role: m.role, content: m.content ?? "" };
    if (m.tool_calls?.length) {
      out.tool_calls = m.tool_calls.map((c) => {
        let args: unknown = c.function.arguments;
        if (typeof args === "string") {
          try {
            args = JSON.parse(args);
          } catch {
            // keep the text: templates print strings as they are
          }
        }
        return { id: c.id, type: "function", function: { name: c.function.name, arguments: args } };
      });
    }
    if (m.tool_call_id) out.tool_call_id = m.tool_call_id;
    if (m.name) out.name = m.name;
    return out;
  });
}

export class ChatEngine {
  readonly models = new Map<string, CausalLM>();
  /** The base model's served name. */
  readonly baseName: string;
  private readonly engines = new Map<string, Promise<GenerationEngine>>();
  private readonly ready: GenerationEngine[] = [];
  /** Prompt-prefix lengths by the system part they were measured on. */
  private readonly prefixes = new Map<string, number>();

  constructor(base: CausalLM, adapters: CausalLM[] = [], private readonly opts: ChatEngineOptions = {}) {
    this.baseName = base.name;
    for (const m of [base, ...adapters]) {
      if (this.models.has(m.name)) throw new T2sError("usage", `two served models are named ${m.name}; give each adapter its own name`);
      if (!m.tokenizer?.hasChatTemplate) throw new T2sError("no_chat_template", `model ${m.name} has no chat template, so it cannot serve chat completions`);
      this.models.set(m.name, m);
    }
  }

  /** Returns the served model, or throws T2sError("model_not_found"). */
  model(name: string): CausalLM {
    const m = this.models.get(name);
    if (!m) throw new T2sError("model_not_found", `model '${name}' is not served here; available: ${[...this.models.keys()].join(", ")}`);
    return m;
  }

  /** The served model's generation engine (made on first use). */
  engine(name: string): Promise<GenerationEngine> {
    const model = this.model(name);
    let e = this.engines.get(name);
    if (!e) {
      e = GenerationEngine.create(model, { maxBatch: this.opts.maxBatch, adapter: this.opts.adapter });
      void e.then((ready) => this.ready.push(ready), () => this.engines.delete(name));
      this.engines.set(name, e);
    }
    return e;
  }

  /** The prompt ids of a chat request (chat template with tools, generation prompt appended). */
  promptIds(req: Pick<ChatRequest, "model" | "messages" | "tools">): number[] {
    const tok = this.model(req.model).requireTokenizer();
    return tok.encode(tok.applyChatTemplate(templateMessages(req.messages), { tools: req.tools, addGenerationPrompt: true }), { addSpecialTokens: false });
  }

  /**
   * How many leading prompt tokens belong to the conversation's system part (the schema and notes), which
   * every request on that database shares: the common prefix of the prompt and the same system part
   * followed by a placeholder turn. A property of the request alone, so a row's arithmetic never depends on
   * what else is batched with it.
   */
  sharedPrefixLength(req: Pick<ChatRequest, "model" | "messages" | "tools">, ids: number[]): number {
    const lead = req.messages.findIndex((m) => m.role !== "system");
    if (lead <= 0) return 0;
    const key = `${req.model}\u0000${JSON.stringify(req.tools ?? null)}\u0000${JSON.stringify(req.messages.slice(0, lead))}`;
    let n = this.prefixes.get(key);
    if (n === undefined) {
      const probe = this.promptIds({ model: req.model, tools: req.tools, messages: [...req.messages.slice(0, lead), { role: "user", content: "\u0001" }] });
      n = commonPrefix([probe, ids]);
      if (this.prefixes.size > 256) this.prefixes.clear();
      this.prefixes.set(key, n);
    }
    return Math.min(n, ids.length - 1);
  }

  /**
   * Runs a chat request through the served model's engine and returns its choices (n rows, seeds
   * seed/0..n-1). Hooks receive text and tokens as they are made; aborting the signal cancels the rows.
   */
  async complete(req: ChatRequest, hooks: ChatHooks = {}): Promise<ChatResult> {
    const model = this.model(req.model);
    const ids = this.promptIds(req);
    const room = model.config.maxPositions - ids.length;
    if (room <= 0) throw new T2sError("context_length_exceeded", `the prompt has ${ids.length} tokens but ${model.name} takes at most ${model.config.maxPositions}`);
    const n = req.n ?? 1;
    const seed = req.seed ?? randomInt(0, 2 ** 31);
    const maxTokens = Math.min(req.maxTokens ?? room, room);
    const prefixLength = this.sharedPrefixLength(req, ids);
    const bias = req.logitBias ? Object.entries(req.logitBias).map(([id, b]) => [Number(id), b] as [number, number]) : undefined;
    const engine = await this.engine(req.model);
    const gens: Generation[] = await Promise.all(
      Array.from({ length: n }, (_, i) =>
        engine.submit({
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
          prefixLength,
          signal: hooks.signal,
          onDelta:
            hooks.onText || hooks.onDelta
              ? (d) => {
                  hooks.onDelta?.(i, d);
                  if (d.text) hooks.onText?.(i, d.text);
                }
              : undefined,
        }),
      ),
    );
    const choices: ChatChoice[] = gens.map((g, i) => {
      const parsed = req.tools?.length ? parseToolCalls(g.text) : { content: g.text, calls: [], invalid: 0 };
      const finishReason = parsed.calls.length ? "tool_calls" : g.finishReason;
      return { index: i, text: g.text, content: parsed.content, toolCalls: parsed.calls, invalidToolCalls: parsed.invalid, finishReason, ids: g.ids, logprobs: g.logprobs, topLogprobs: g.topLogprobs };
    });
    return { model: model.name, promptTokens: ids.length, promptIds: ids, completionTokens: gens.reduce((s, g) => s + g.ids.length, 0), choices };
  }

  /** Sequences running and waiting now, over the served models whose engines have started. */
  load(): { running: number; waiting: number } {
    const out = { running: 0, waiting: 0 };
    for (const e of this.ready) {
      out.running += e.load.running;
      out.waiting += e.load.waiting;
    }
    return out;
  }

  /** Running and waiting sequences and the engines' counters, summed over the served models. */
  async metrics(): Promise<EngineMetrics> {
    const total: EngineMetrics = { running: 0, waiting: 0, steps: 0, promptTokens: 0, generatedTokens: 0, batchRows: 0, finished: 0, cancelled: 0 };
    for (const e of this.engines.values()) {
      const m = (await e).metrics;
      const load = (await e).load;
      total.running += load.running;
      total.waiting += load.waiting;
      for (const k of ["steps", "promptTokens", "generatedTokens", "batchRows", "finished", "cancelled"] as const) total[k] += m[k];
    }
    return total;
  }

  /** The served weights changed (a training step): engines drop what they derived from the old ones. */
  weightsChanged(): void {
    for (const e of this.ready) e.weightsChanged();
  }

  /** Cancels what is in flight and frees the engines. */
  async close(): Promise<void> {
    for (const e of this.engines.values()) await (await e).close();
    this.engines.clear();
    this.ready.length = 0;
  }
}
