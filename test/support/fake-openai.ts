/**
 * A real local HTTP server speaking OpenAI's chat-completions protocol, scripted by the tests: gold or
 * wrong queries, native tool calls, hermes text tool calls, slow answers, 5xx/429 errors, replies cut by
 * the token limit, and a not-ready phase for warm-up. Every request is logged for assertions.
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";

export interface FakeToolCall {
  name: string;
  /** Object (sent as JSON) or raw text (to send malformed JSON). */
  arguments: unknown;
}

export type FakeAction =
  | { content: string; finish_reason?: "stop" | "length"; delay_ms?: number; completion_tokens?: number }
  | { tool_calls: FakeToolCall[]; content?: string; delay_ms?: number }
  | { hermes: FakeToolCall[]; content?: string; delay_ms?: number }
  | { status: number; body?: string; delay_ms?: number; headers?: Record<string, string> }
  /** Accepts the request and never answers (client timeouts). */
  | { hang: true };

export interface FakeRequest {
  body: Record<string, unknown>;
  messages: Array<{ role: string; content: string | null; tool_calls?: unknown[]; tool_call_id?: string }>;
  /** The first user message. */
  question: string;
  /** Assistant messages already in the conversation (0 for the first turn). */
  turn: number;
  /** How many times this exact request body was seen before (retries of the same request). */
  attempt: number;
  hasTools: boolean;
}

export type Responder = (req: FakeRequest) => FakeAction | Promise<FakeAction>;

/** A rule of `scriptedResponder`: requests whose question contains `match`; `turns[t]` answers turn t (the last repeats); a list answers attempt i with entry i (the last repeats). */
export interface FakeRule {
  match: string;
  turns: Array<FakeAction | FakeAction[]>;
}

/** A responder driven by rules; a request no rule matches gets a 400 naming its question. */
export function scriptedResponder(rules: FakeRule[]): Responder {
  return (req) => {
    const rule = rules.find((r) => req.question.includes(r.match));
    if (!rule) return { status: 400, body: JSON.stringify({ error: { message: `no rule for question: ${req.question}` } }) };
    const t = rule.turns[Math.min(req.turn, rule.turns.length - 1)];
    return Array.isArray(t) ? t[Math.min(req.attempt, t.length - 1)] : t;
  };
}

export interface FakeServer {
  url: string;
  /** Base URL for a policy spec (ends in /v1). */
  baseUrl: string;
  requests: FakeRequest[];
  /** Requests answered with each HTTP status. */
  statusCounts: Record<number, number>;
  close(): Promise<void>;
}

export interface FakeServerOptions {
  /** Answer 503 to everything until this many ms after start (a server loading weights). */
  readyAfterMs?: number;
  model?: string;
}

function send(res: ServerResponse, status: number, body: string, headers: Record<string, string> = {}): void {
  res.writeHead(status, { ...headers, "content-type": "application/json", "content-length": Buffer.byteLength(body) });
  res.end(body);
}

function completionBody(req: FakeRequest, action: FakeAction, model: string, seq: number): string {
  let content: string | null = null;
  let toolCalls: unknown[] | undefined;
  let finish = "stop";
  let completionTokens = 8;
  if ("tool_calls" in action) {
    content = action.content ?? null;
    toolCalls = action.tool_calls.map((c, i) => ({
      id: `call_${seq}_${i}`,
      type: "function",
      function: { name: c.name, arguments: typeof c.arguments === "string" ? c.arguments : JSON.stringify(c.arguments) },
    }));
    finish = "tool_calls";
  } else if ("hermes" in action) {
    const blocks = action.hermes.map((c) => {
      const args = typeof c.arguments === "string" ? c.arguments : JSON.stringify(c.arguments);
      return `<tool_call>\n{"name": ${JSON.stringify(c.name)}, "arguments": ${args}}\n</tool_call>`;
    });
    content = [action.content ?? "", ...blocks].filter(Boolean).join("\n");
  } else if ("content" in action) {
    content = action.content;
    finish = action.finish_reason ?? "stop";
    completionTokens = action.completion_tokens ?? Math.max(1, Math.ceil(action.content.length / 4));
  }
  const promptChars = req.messages.reduce((s, m) => s + (m.content?.length ?? 0), 0);
  const n = typeof req.body.n === "number" ? req.body.n : 1;
  const message: Record<string, unknown> = { role: "assistant", content };
  if (toolCalls) message.tool_calls = toolCalls;
  return JSON.stringify({
    id: `chatcmpl-${seq}`,
    object: "chat.completion",
    created: Math.floor(Date.now() / 1000),
    model,
    choices: Array.from({ length: n }, (_, index) => ({ index, message, finish_reason: finish })),
    usage: { prompt_tokens: Math.ceil(promptChars / 4), completion_tokens: completionTokens * n, total_tokens: Math.ceil(promptChars / 4) + completionTokens * n },
  });
}

/** Starts the server on a free localhost port. */
export async function startFakeOpenAI(respond: Responder, opts: FakeServerOptions = {}): Promise<FakeServer> {
  const started = Date.now();
  const model = opts.model ?? "fake-model";
  const seen = new Map<string, number>();
  const requests: FakeRequest[] = [];
  const statusCounts: Record<number, number> = {};
  let seq = 0;
  const answer = (res: ServerResponse, status: number, body: string, headers?: Record<string, string>) => {
    statusCounts[status] = (statusCounts[status] ?? 0) + 1;
    send(res, status, body, headers);
  };

  const server: Server = createServer((req: IncomingMessage, res: ServerResponse) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", async () => {
      try {
        if (opts.readyAfterMs && Date.now() - started < opts.readyAfterMs) return answer(res, 503, '{"error":{"message":"loading"}}');
        if (req.method === "GET" && req.url === "/v1/models") return answer(res, 200, JSON.stringify({ object: "list", data: [{ id: model, object: "model" }] }));
        if (req.method !== "POST" || req.url !== "/v1/chat/completions") return answer(res, 404, '{"error":{"message":"not found"}}');
        const text = Buffer.concat(chunks).toString("utf8");
        const body = JSON.parse(text) as Record<string, unknown>;
        const messages = (body.messages ?? []) as FakeRequest["messages"];
        const attempt = seen.get(text) ?? 0;
        seen.set(text, attempt + 1);
        const fr: FakeRequest = {
          body,
          messages,
          question: messages.find((m) => m.role === "user")?.content ?? "",
          turn: messages.filter((m) => m.role === "assistant").length,
          attempt,
          hasTools: Array.isArray(body.tools) && body.tools.length > 0,
        };
        requests.push(fr);
        const action = await respond(fr);
        if ("hang" in action) return;
        if (action.delay_ms) await new Promise((r) => setTimeout(r, action.delay_ms));
        if ("status" in action) return answer(res, action.status, action.body ?? JSON.stringify({ error: { message: `scripted ${action.status}` } }), action.headers);
        answer(res, 200, completionBody(fr, action, model, seq++));
      } catch (e) {
        answer(res, 500, JSON.stringify({ error: { message: `fake server bug: ${(e as Error).message}` } }));
      }
    });
  });
  server.keepAliveTimeout = 60_000;
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const port = (server.address() as AddressInfo).port;
  const url = `http://127.0.0.1:${port}`;
  return {
    url,
    baseUrl: `${url}/v1`,
    requests,
    statusCounts,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
