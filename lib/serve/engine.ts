/**
 * The chat layer over the models: OpenAI-style messages (+ tools) -> chat template -> token ids -> a
 * batched generation -> choices with hermes tool calls parsed. The HTTP server and the in-process `tfjs:`
 * policy both use it, so they serve exactly the same prompts.
 */
import { randomInt } from "node:crypto";
import { T2sError } from "../errors.js";
import type { CausalLM } from "../model/model.js";
import type { TemplateMessage } from "../model/tokenizer.js";
import { Batcher, type BatcherOptions } from "./batcher.js";
import { parseToolCalls, type ParsedToolCall } from "./toolcalls.js";

export interface ChatMessageIn {
  role: string;
  content: string | null;
  tool_calls?: { id?: string; type?: string; function: { name: string; arguments: string | Record<string, unknown> } }[];
  tool_call_id?: string;
  name?: string;
}

export interface ChatRequest {
  model: string;
  messages: ChatMessageIn[];
  tools?: unknown[];
  n?: number;
  temperature?: number;
  topP?: number;
  maxTokens?: number;
  stop?: string[];
  seed?: number;
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
}

export interface ChatResult {
  model: string;
  promptTokens: number;
  completionTokens: number;
  choices: ChatChoice[];
}

/** Tool call arguments arrive as JSON text; templates expect objects, so parse what parses. */
function templateMessages(messages: ChatMessageIn[]): TemplateMessage[] {
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
  readonly batcher: Batcher;
  /** The base model's served name. */
  readonly baseName: string;

  constructor(base: CausalLM, adapters: CausalLM[] = [], opts: BatcherOptions = {}) {
    this.baseName = base.name;
    for (const m of [base, ...adapters]) {
      if (this.models.has(m.name)) throw new T2sError("usage", `two served models are named ${m.name}; give each adapter its own name`);
      if (!m.tokenizer?.hasChatTemplate) throw new T2sError("no_chat_template", `model ${m.name} has no chat template, so it cannot serve chat completions`);
      this.models.set(m.name, m);
    }
    this.batcher = new Batcher(opts);
  }

  /** Returns the served model, or throws T2sError("model_not_found"). */
  model(name: string): CausalLM {
    const m = this.models.get(name);
    if (!m) throw new T2sError("model_not_found", `model '${name}' is not served here; available: ${[...this.models.keys()].join(", ")}`);
    return m;
  }

  /** The prompt ids of a chat request (chat template with tools, generation prompt appended). */
  promptIds(req: Pick<ChatRequest, "model" | "messages" | "tools">): number[] {
    const tok = this.model(req.model).requireTokenizer();
    return tok.encode(tok.applyChatTemplate(templateMessages(req.messages), { tools: req.tools }), { addSpecialTokens: false });
  }

  /**
   * Runs a chat request (batched with whatever else is pending) and returns its choices. `onText` gets the
   * content pieces of each choice as they are sampled.
   */
  async complete(req: ChatRequest, onText?: (choice: number, delta: string) => void): Promise<ChatResult> {
    const model = this.model(req.model);
    const ids = this.promptIds(req);
    const room = model.config.maxPositions - ids.length;
    if (room <= 0) throw new T2sError("context_length_exceeded", `the prompt has ${ids.length} tokens but ${model.name} takes at most ${model.config.maxPositions}`);
    const n = req.n ?? 1;
    const seed = req.seed ?? randomInt(0, 2 ** 31);
    const maxTokens = Math.min(req.maxTokens ?? room, room);
    const rows = Array.from({ length: n }, (_, i) => ({ ids, maxTokens, stop: req.stop, seed, sampleIndex: i, temperature: req.temperature ?? 1, topP: req.topP ?? 1 }));
    const gens = await this.batcher.submit({ model, rows, onText });
    const choices: ChatChoice[] = gens.map((g, i) => {
      const parsed = req.tools?.length ? parseToolCalls(g.text) : { content: g.text, calls: [], invalid: 0 };
      const finishReason = parsed.calls.length ? "tool_calls" : g.finishReason;
      return { index: i, text: g.text, content: parsed.content, toolCalls: parsed.calls, invalidToolCalls: parsed.invalid, finishReason, ids: g.ids, logprobs: g.logprobs };
    });
    return { model: model.name, promptTokens: ids.length, completionTokens: gens.reduce((s, g) => s + g.ids.length, 0), choices };
  }
}
