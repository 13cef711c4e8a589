/**
 * The OpenAI chat-completions wire format: validating a request body (every problem is a 400 naming the
 * field) and shaping responses, stream chunks and errors.
 */
import type { ChatMessage, ToolCall } from "../core/messages.js";
import type { ChatRequest, ChatResult, ToolChoice } from "../model/chat.js";
import { openAiToolCalls } from "../model/toolcalls.js";
import { bad, optNumber, parseSampling, refuseUnsupported, RequestError, SAMPLING_KEYS, type StreamOptions } from "./params.js";

export { RequestError } from "./params.js";

/** The JSON body of an error response. */
export function errorBody(e: RequestError): Record<string, unknown> {
  return { error: { message: e.message, type: e.type, param: e.param, code: e.code } };
}

const ROLES = new Set(["system", "user", "assistant", "tool", "developer"]);

export interface ParsedRequest extends ChatRequest, StreamOptions {
  /** Return the log-probability of each sampled token. */
  logprobs: boolean;
}

const CHAT_KEYS = new Set([...SAMPLING_KEYS, "messages", "tools", "tool_choice", "top_logprobs", "max_completion_tokens", "chat_template_kwargs", "add_special_tokens"]);

/** The body as an object with a model name, or a 400. */
export function requestObject(raw: unknown): Record<string, unknown> & { model: string } {
  if (!raw || typeof raw !== "object" || Array.isArray(raw)) throw bad("body", "the request body must be a JSON object");
  const body = raw as Record<string, unknown>;
  if (typeof body.model !== "string" || body.model === "") throw bad("model", "'model' is required (a served model name; see GET /v1/models)");
  return body as Record<string, unknown> & { model: string };
}

/** The messages of a chat body (text parts only), or a 400 naming the bad one. */
export function parseMessages(body: Record<string, unknown>): ChatRequest["messages"] {
  if (!Array.isArray(body.messages) || body.messages.length === 0) throw bad("messages", "'messages' must be a non-empty array");
  return body.messages.map((m, i) => {
    if (!m || typeof m !== "object") throw bad(`messages[${i}]`, `messages[${i}] must be an object`);
    const msg = m as Record<string, unknown>;
    if (typeof msg.role !== "string" || !ROLES.has(msg.role)) throw bad(`messages[${i}].role`, `messages[${i}].role must be one of ${[...ROLES].join(", ")}`);
    let content = msg.content;
    if (Array.isArray(content)) {
      // text parts only: this server has no image or audio input
      content = content.map((p, j) => {
        const part = p as { type?: string; text?: unknown };
        if (part?.type !== "text" || typeof part.text !== "string") throw bad(`messages[${i}].content[${j}]`, "only text content parts are supported");
        return part.text;
      }).join("");
    }
    if (content !== null && content !== undefined && typeof content !== "string") throw bad(`messages[${i}].content`, `messages[${i}].content must be a string`);
    if ((content === null || content === undefined) && !(msg.role === "assistant" && Array.isArray(msg.tool_calls))) throw bad(`messages[${i}].content`, `messages[${i}].content is required`);
    if (msg.tool_calls !== undefined && !Array.isArray(msg.tool_calls)) throw bad(`messages[${i}].tool_calls`, "tool_calls must be an array");
    const role = (msg.role === "developer" ? "system" : msg.role) as ChatMessage["role"];
    const toolCalls = msg.tool_calls === undefined ? undefined : (msg.tool_calls as unknown[]).map((c, j) => wireToolCall(c, `messages[${i}].tool_calls[${j}]`));
    return { role, content: (content as string | null | undefined) ?? null, tool_calls: toolCalls, tool_call_id: typeof msg.tool_call_id === "string" ? msg.tool_call_id : undefined, name: typeof msg.name === "string" ? msg.name : undefined };
  });
}

/** One tool call of a request's history: clients send arguments as JSON text or as an object, ids optional. */
function wireToolCall(raw: unknown, where: string): ToolCall {
  const c = raw as { id?: unknown; function?: { name?: unknown; arguments?: unknown } } | null;
  if (!c || typeof c !== "object" || !c.function || typeof c.function.name !== "string") throw bad(where, `${where} must be {"function": {"name": ..., "arguments": ...}}`);
  const args = c.function.arguments;
  return { id: typeof c.id === "string" ? c.id : "", type: "function", function: { name: c.function.name, arguments: typeof args === "string" ? args : JSON.stringify(args ?? {}) } };
}

function parseToolChoice(v: unknown, tools: unknown[] | undefined): ToolChoice | undefined {
  if (v === undefined || v === null) return undefined;
  const names = (tools ?? []).map((t) => (t as { function: { name: string } }).function.name);
  if (v === "none" || v === "auto") return v;
  if (v === "required") {
    if (!names.length) throw bad("tool_choice", "tool_choice 'required' needs 'tools'");
    return v;
  }
  const named = v as { type?: unknown; function?: { name?: unknown } };
  if (named?.type !== "function" || typeof named.function?.name !== "string") throw bad("tool_choice", `'tool_choice' must be "none", "auto", "required" or {"type": "function", "function": {"name": ...}}`);
  if (!names.includes(named.function.name)) throw bad("tool_choice", `tool_choice names '${named.function.name}', which is not among the tools (${names.join(", ") || "none given"})`);
  return { name: named.function.name };
}

/** The tools of a body (undefined when none), or a 400 naming the bad one. */
export function parseTools(body: Record<string, unknown>): unknown[] | undefined {
  let tools: unknown[] | undefined;
  if (body.tools !== undefined && body.tools !== null) {
    if (!Array.isArray(body.tools)) throw bad("tools", "'tools' must be an array");
    body.tools.forEach((t, i) => {
      const tool = t as { type?: string; function?: { name?: unknown; parameters?: unknown; strict?: unknown } };
      if (tool?.type !== "function" || typeof tool.function?.name !== "string" || tool.function.name === "") throw bad(`tools[${i}]`, `tools[${i}] must be {"type": "function", "function": {"name": ...}}`);
      const params = tool.function.parameters;
      if (params !== undefined && params !== null && (typeof params !== "object" || Array.isArray(params))) throw bad(`tools[${i}].function.parameters`, `tools[${i}].function.parameters must be a JSON Schema object`);
      if (params && typeof params === "object" && "type" in params && typeof (params as { type: unknown }).type !== "string" && !Array.isArray((params as { type: unknown }).type)) throw bad(`tools[${i}].function.parameters`, `tools[${i}].function.parameters.type must be a JSON Schema type`);
      if (tool.function.strict !== undefined && tool.function.strict !== null && typeof tool.function.strict !== "boolean") throw bad(`tools[${i}].function.strict`, "'strict' must be a boolean");
    });
    tools = body.tools.length ? body.tools : undefined;
  }
  return tools;
}

/** vLLM's chat_template_kwargs: extra variables for the chat template (undefined when absent). */
export function parseTemplateKwargs(body: Record<string, unknown>): Record<string, unknown> | undefined {
  const v = body.chat_template_kwargs;
  if (v === undefined || v === null) return undefined;
  if (typeof v !== "object" || Array.isArray(v)) throw bad("chat_template_kwargs", "'chat_template_kwargs' must be an object of template variables");
  const out: Record<string, unknown> = {};
  for (const k of Object.keys(v)) {
    if (k === "messages" || k === "tools" || k === "__proto__") throw bad("chat_template_kwargs", `chat_template_kwargs may not set '${k}'`);
    out[k] = (v as Record<string, unknown>)[k];
  }
  return Object.keys(out).length ? out : undefined;
}

/** Returns the chat request a body describes, or throws RequestError(400) naming the first bad field. */
export function parseChatBody(raw: unknown, vocab: number): ParsedRequest {
  const body = requestObject(raw);
  refuseUnsupported(body, CHAT_KEYS);
  const messages = parseMessages(body);
  const tools = parseTools(body);
  const logprobs = body.logprobs ?? false;
  if (typeof logprobs !== "boolean") throw bad("logprobs", "'logprobs' must be a boolean (use top_logprobs for a count)");
  const topLogprobs = optNumber(body, "top_logprobs", 0, 20, true);
  if (topLogprobs && !logprobs) throw bad("top_logprobs", "'top_logprobs' needs 'logprobs': true");
  return { model: body.model, messages, tools, toolChoice: parseToolChoice(body.tool_choice, tools), ...parseSampling(body, vocab), logprobs, topLogprobs: topLogprobs || undefined, truncatePromptTokens: optNumber(body, "truncate_prompt_tokens", 1, 1e9, true), templateKwargs: parseTemplateKwargs(body), addSpecialTokens: body.add_special_tokens === true };
}

type Top = { id: number; logprob: number }[];

/** The OpenAI `logprobs.content` entries of some sampled tokens, named by `tokenText`. */
export function logprobsContent(ids: number[], logprobs: number[], top: Top[] | undefined, tokenText: (id: number) => string): Record<string, unknown>[] {
  const entry = (id: number, logprob: number) => {
    const token = tokenText(id);
    // a banned token's -Infinity is no JSON number: vLLM's -9999.0 stands for it
    return { token, logprob: Math.max(logprob, -9999), bytes: [...Buffer.from(token, "utf8")] };
  };
  return ids.map((id, j) => ({ ...entry(id, logprobs[j]), top_logprobs: (top?.[j] ?? []).map((t) => entry(t.id, t.logprob)) }));
}

/** The body of a non-streaming chat completion; `tokenText` names sampled tokens when logprobs are asked for. */
export function completionBody(id: string, created: number, r: ChatResult, tokenText?: (id: number) => string): Record<string, unknown> {
  return {
    id,
    object: "chat.completion",
    created,
    model: r.model,
    choices: r.choices.map((c) => ({
      index: c.index,
      message: { role: "assistant", content: c.content, ...(c.toolCalls.length ? { tool_calls: openAiToolCalls(c.toolCalls) } : {}) },
      logprobs: tokenText ? { content: logprobsContent(c.ids, c.logprobs, c.topLogprobs, tokenText) } : null,
      finish_reason: c.finishReason,
    })),
    usage: usageBody(r),
  };
}

/** Token counts as OpenAI reports them (the prompt once, whatever n is). */
export function usageBody(r: ChatResult): Record<string, number> {
  return { prompt_tokens: r.promptTokens, completion_tokens: r.completionTokens, total_tokens: r.promptTokens + r.completionTokens };
}

/** One streaming chunk (`logprobs` = the logprobs.content entries of the chunk's tokens). */
export function chunkBody(id: string, created: number, model: string, index: number, delta: Record<string, unknown>, finishReason: string | null, logprobs?: Record<string, unknown>[]): Record<string, unknown> {
  return { id, object: "chat.completion.chunk", created, model, choices: [{ index, delta, logprobs: logprobs ? { content: logprobs } : null, finish_reason: finishReason }] };
}

/** The tool_calls delta of streamed calls, numbered from `first` within their choice. */
export function toolCallsDelta(calls: ChatResult["choices"][number]["toolCalls"], first = 0): Record<string, unknown> {
  return { tool_calls: openAiToolCalls(calls).map((c, i) => ({ index: first + i, ...c })) };
}
