/**
 * The OpenAI chat-completions wire format: validating a request body (every problem is a 400 naming the
 * field) and shaping responses, stream chunks and errors.
 */
import type { ChatRequest, ChatResult } from "../model/chat.js";

/** A request problem the client can fix: answered with `status` and an OpenAI-style error body. */
export class RequestError extends Error {
  readonly status: number;
  readonly param: string | null;
  readonly code: string | null;
  readonly type: string;
  constructor(status: number, message: string, opts: { param?: string; code?: string; type?: string } = {}) {
    super(message);
    this.status = status;
    this.param = opts.param ?? null;
    this.code = opts.code ?? null;
    this.type = opts.type ?? (status >= 500 ? "server_error" : "invalid_request_error");
  }
}

/** The JSON body of an error response. */
export function errorBody(e: RequestError): Record<string, unknown> {
  return { error: { message: e.message, type: e.type, param: e.param, code: e.code } };
}

const ROLES = new Set(["system", "user", "assistant", "tool", "developer"]);

function bad(param: string, message: string): RequestError {
  return new RequestError(400, message, { param });
}

function optNumber(body: Record<string, unknown>, key: string, min: number, max: number, integer = false): number | undefined {
  const v = body[key];
  if (v === undefined || v === null) return undefined;
  if (typeof v !== "number" || !Number.isFinite(v) || (integer && !Number.isInteger(v)) || v < min || v > max) {
    throw bad(key, `'${key}' must be ${integer ? "an integer" : "a number"} in [${min}, ${max}], got ${JSON.stringify(v)}`);
  }
  return v;
}

export interface ParsedRequest extends ChatRequest {
  stream: boolean;
  includeUsage: boolean;
  /** Return the log-probability of each sampled token (non-streaming responses). */
  logprobs: boolean;
}

/** Returns the chat request a body describes, or throws RequestError(400) naming the first bad field. */
export function parseChatBody(raw: unknown): ParsedRequest {
  if (!raw || typeof raw !== "object" || Array.isArray(raw)) throw bad("body", "the request body must be a JSON object");
  const body = raw as Record<string, unknown>;
  if (typeof body.model !== "string" || body.model === "") throw bad("model", "'model' is required (a served model name; see GET /v1/models)");
  if (!Array.isArray(body.messages) || body.messages.length === 0) throw bad("messages", "'messages' must be a non-empty array");
  const messages = body.messages.map((m, i) => {
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
    return { role: msg.role === "developer" ? "system" : msg.role, content: (content as string | null | undefined) ?? null, tool_calls: msg.tool_calls as ChatRequest["messages"][number]["tool_calls"], tool_call_id: typeof msg.tool_call_id === "string" ? msg.tool_call_id : undefined, name: typeof msg.name === "string" ? msg.name : undefined };
  });
  let stop: string[] | undefined;
  if (typeof body.stop === "string") stop = [body.stop];
  else if (Array.isArray(body.stop)) {
    if (body.stop.length > 4 || body.stop.some((s) => typeof s !== "string")) throw bad("stop", "'stop' must be a string or an array of at most 4 strings");
    stop = body.stop as string[];
  } else if (body.stop !== undefined && body.stop !== null) throw bad("stop", "'stop' must be a string or an array of strings");
  let tools: unknown[] | undefined;
  if (body.tools !== undefined && body.tools !== null) {
    if (!Array.isArray(body.tools)) throw bad("tools", "'tools' must be an array");
    body.tools.forEach((t, i) => {
      const tool = t as { type?: string; function?: { name?: unknown } };
      if (tool?.type !== "function" || typeof tool.function?.name !== "string") throw bad(`tools[${i}]`, `tools[${i}] must be {"type": "function", "function": {"name": ...}}`);
    });
    tools = body.tools.length ? body.tools : undefined;
  }
  if (body.stream !== undefined && body.stream !== null && typeof body.stream !== "boolean") throw bad("stream", "'stream' must be a boolean");
  const streamOptions = body.stream_options as { include_usage?: boolean } | undefined;
  return {
    model: body.model,
    messages,
    tools,
    n: optNumber(body, "n", 1, 64, true),
    temperature: optNumber(body, "temperature", 0, 2),
    topP: optNumber(body, "top_p", Number.MIN_VALUE, 1),
    maxTokens: optNumber(body, "max_completion_tokens", 1, 1e7, true) ?? optNumber(body, "max_tokens", 1, 1e7, true),
    stop,
    seed: optNumber(body, "seed", -(2 ** 53), 2 ** 53, true),
    stream: body.stream === true,
    includeUsage: streamOptions?.include_usage === true,
    logprobs: body.logprobs === true,
  };
}

let counter = 0;
/** A fresh id with a prefix ("chatcmpl", "call"). */
export function newId(prefix: string): string {
  counter = (counter + 1) % 1e9;
  return `${prefix}-${Date.now().toString(36)}${counter.toString(36)}`;
}

function toolCallsJson(calls: ChatResult["choices"][number]["toolCalls"]) {
  return calls.map((c) => ({ id: newId("call"), type: "function" as const, function: { name: c.name, arguments: c.arguments } }));
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
      message: { role: "assistant", content: c.content, ...(c.toolCalls.length ? { tool_calls: toolCallsJson(c.toolCalls) } : {}) },
      // top_logprobs stay empty: only the sampled token's log-probability is kept
      logprobs: tokenText ? { content: c.ids.map((t, j) => ({ token: tokenText(t), logprob: c.logprobs[j], bytes: [...Buffer.from(tokenText(t), "utf8")], top_logprobs: [] })) } : null,
      finish_reason: c.finishReason,
    })),
    usage: usageBody(r),
  };
}

/** Token counts as OpenAI reports them (the prompt once, whatever n is). */
export function usageBody(r: ChatResult): Record<string, number> {
  return { prompt_tokens: r.promptTokens, completion_tokens: r.completionTokens, total_tokens: r.promptTokens + r.completionTokens };
}

/** One streaming chunk. */
export function chunkBody(id: string, created: number, model: string, index: number, delta: Record<string, unknown>, finishReason: string | null): Record<string, unknown> {
  return { id, object: "chat.completion.chunk", created, model, choices: [{ index, delta, logprobs: null, finish_reason: finishReason }] };
}

/** The tool_calls delta of a finished streamed choice. */
export function toolCallsDelta(calls: ChatResult["choices"][number]["toolCalls"]): Record<string, unknown> {
  return { tool_calls: toolCallsJson(calls).map((c, i) => ({ index: i, ...c })) };
}
