/**
 * `openai:<model>@<base_url>`: any server that speaks OpenAI's /v1/chat/completions (vLLM, SGLang,
 * llama.cpp server, Ollama, hosted APIs). Transient failures (429, 5xx, connection errors, timeouts) are
 * retried with backoff and reported through `onRetry` as re-rolls; they never become a model failure.
 * Each request's max_tokens is sized to the server's context window (context.ts); a refusal for the
 * run's setup (context, key, model name) is a setup PolicyError, never a model failure either.
 */
import { CONCURRENCY, settingFromEnv } from "../core/defaults.js";
import { T2sError, UsageError } from "../core/errors.js";
import { ContextWindows, isContextRefusal, type PromptParts } from "./context.js";
import { httpCall, makeAgents } from "./http.js";
import { EndpointPool } from "./endpoints.js";
import { Limiter } from "./limiter.js";
import { sleep, withRetries } from "./retry.js";
import { PolicyError, type ChatMessage, type Completion, type FinishReason, type Policy, type SampleOptions, type ToolCall, type ToolSpec } from "./types.js";

export interface OpenAIPolicyOptions {
  /** Requests in flight at once (default 8). */
  concurrency?: number;
  /** Retries per request on 429/5xx/connection/timeout (default 6). */
  retries?: number;
  /** First backoff delay in ms (default 1000; doubles per retry, jittered, capped at 60 s). */
  backoffMs?: number;
  /** Per-request timeout in ms; default max(300 s, max_tokens / 4 tokens per second). */
  timeoutMs?: number;
  /** API key; default from $T2S_API_KEY, else $OPENAI_API_KEY (none: no Authorization header). */
  apiKey?: string;
}

function normaliseBaseUrl(rest: string, raw: string): string {
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    throw new UsageError(`policy 'openai:${rest}': '${raw}' is not a URL`);
  }
  let base = url.toString().replace(/\/+$/, "");
  if (url.pathname === "/" || url.pathname === "") base += "/v1";
  return base;
}

/**
 * Splits "<model>@<base_url>[,<base_url>...]" (several URLs: a fleet serving one model) and normalises each
 * URL to end in /v1 when it has no path. `baseUrl` is the first.
 */
export function parseOpenAISpec(rest: string): { model: string; baseUrl: string; baseUrls: string[] } {
  const m = /^(.+?)@(https?:\/\/.+)$/.exec(rest);
  if (!m) throw new UsageError(`policy 'openai:${rest}' must look like openai:<model>@http://host:port/v1 (or several URLs joined by commas)`);
  const raws = m[2].split(",").map((u) => u.trim());
  if (raws.some((u) => u === "")) throw new UsageError(`policy 'openai:${rest}': an empty URL in the comma-separated list`);
  const baseUrls = raws.map((u) => normaliseBaseUrl(rest, u));
  if (new Set(baseUrls).size !== baseUrls.length) throw new UsageError(`policy 'openai:${rest}': a URL is listed twice`);
  return { model: m[1], baseUrl: baseUrls[0], baseUrls };
}

/** The default per-request timeout: max(300 s, max_tokens / 4 tokens per second). */
export function defaultTimeoutMs(maxTokens: number | undefined): number {
  return Math.max(300_000, ((maxTokens ?? 0) / 4) * 1000);
}

function finishReason(raw: unknown, hasToolCalls: boolean): FinishReason {
  if (raw === "length") return "length";
  if (raw === "tool_calls" || raw === "function_call") return "tool_calls";
  return hasToolCalls && raw == null ? "tool_calls" : "stop";
}

/** Retry-After in ms (seconds or an HTTP date), or undefined. */
export function retryAfterMs(header: string | string[] | undefined, now = Date.now()): number | undefined {
  const v = Array.isArray(header) ? header[0] : header;
  if (!v) return undefined;
  const secs = Number(v);
  if (Number.isFinite(secs)) return Math.max(0, secs * 1000);
  const at = Date.parse(v);
  return Number.isNaN(at) ? undefined : Math.max(0, at - now);
}

function classifyStatus(status: number, body: string, origin: string, retryAfter?: number): PolicyError {
  const detail = body.slice(0, 300).replace(/\s+/g, " ");
  if (status === 429 || status === 408 || status >= 500) {
    return new PolicyError(`http_${status}`, `${origin} answered ${status}: ${detail}`, { retryable: true, status, retryAfterMs: retryAfter });
  }
  if (status === 401 || status === 403) {
    return new PolicyError("auth", `${origin} refused the API key (${status}); set T2S_API_KEY or OPENAI_API_KEY: ${detail}`, { status, fatal: true, setup: true });
  }
  if (status === 404) {
    return new PolicyError("not_found", `${origin} answered 404 (wrong base URL or unknown model?): ${detail}`, { status, fatal: true, setup: true });
  }
  return new PolicyError(`http_${status}`, `${origin} answered ${status}: ${detail}`, { status });
}

interface WireChoice {
  message?: { content?: string | null; tool_calls?: Array<{ id?: string; function?: { name?: string; arguments?: unknown } }> };
  finish_reason?: string | null;
}

/** Turns a chat-completions JSON reply into completions; throws a retryable PolicyError when it is not one. */
export function parseChatReply(json: unknown, latencyMs: number): Completion[] {
  const j = json as { choices?: WireChoice[]; usage?: { prompt_tokens?: number; completion_tokens?: number } };
  if (!j || !Array.isArray(j.choices) || j.choices.length === 0) {
    throw new PolicyError("bad_response", "reply has no choices", { retryable: true });
  }
  const n = j.choices.length;
  const tokensIn = j.usage?.prompt_tokens ?? 0;
  const tokensOut = j.usage?.completion_tokens ?? 0;
  return j.choices.map((c, i) => {
    const calls: ToolCall[] = (c.message?.tool_calls ?? []).map((tc, k) => ({
      id: tc.id ?? `call_${i}_${k}`,
      type: "function",
      function: {
        name: tc.function?.name ?? "",
        arguments: typeof tc.function?.arguments === "string" ? tc.function.arguments : JSON.stringify(tc.function?.arguments ?? {}),
      },
    }));
    return {
      text: c.message?.content ?? "",
      tool_calls: calls,
      finish_reason: finishReason(c.finish_reason, calls.length > 0),
      tokens_in: tokensIn,
      tokens_out: Math.round(tokensOut / n),
      latency_ms: latencyMs,
    };
  });
}

/**
 * A Policy backed by an OpenAI-compatible chat-completions server, or a fleet of them serving one model:
 * requests go to the endpoint with the fewest outstanding, a failed one is tried on the others, and each
 * completion says which endpoint answered.
 */
export class OpenAIPolicy implements Policy {
  readonly name: string;
  readonly adapter = null;
  /** The first (or only) endpoint. */
  readonly baseUrl: string;
  readonly endpoints: EndpointPool;
  private readonly limiter: Limiter;
  private readonly agents;
  private readonly apiKey: string | undefined;
  private readonly windows: ContextWindows;

  constructor(readonly model: string, baseUrl: string | readonly string[], private readonly opts: OpenAIPolicyOptions = {}) {
    const urls = typeof baseUrl === "string" ? [baseUrl] : [...baseUrl];
    this.endpoints = new EndpointPool(urls);
    this.baseUrl = urls[0];
    this.name = `openai:${model}@${urls.join(",")}`;
    this.limiter = new Limiter(opts.concurrency ?? CONCURRENCY);
    this.agents = makeAgents(opts.concurrency ?? CONCURRENCY);
    this.apiKey = opts.apiKey ?? settingFromEnv("api_key") ?? process.env.OPENAI_API_KEY;
    const lookupMs = opts.timeoutMs ?? defaultTimeoutMs(undefined);
    this.windows = new ContextWindows(model, {
      get: (url) => httpCall(url, { headers: this.headers(), timeoutMs: lookupMs, agent: this.agentFor(url) }),
      post: (url, body) => httpCall(url, { method: "POST", body, headers: this.headers(), timeoutMs: lookupMs, agent: this.agentFor(url) }),
    });
  }

  /** The context window (max_model_len) `baseUrl` reported for the model, once a request has gone there; null when unknown. */
  contextWindow(baseUrl = this.baseUrl): number | null {
    return this.windows.limit(baseUrl);
  }

  private headers(): Record<string, string> {
    return this.apiKey ? { authorization: `Bearer ${this.apiKey}` } : {};
  }

  private agentFor(url: string) {
    return url.startsWith("https:") ? this.agents.https : this.agents.http;
  }

  /**
   * Returns the completions for `messages`; retries transient failures and reports each via `onRetry`.
   * max_tokens is cut to the room the server's context window leaves after the prompt (context.ts).
   */
  complete(messages: ChatMessage[], opts: SampleOptions & { tools?: ToolSpec[] }): Promise<Completion[]> {
    const body: Record<string, unknown> = { model: this.model, messages: messages.map(toWire) };
    if (opts.temperature !== undefined) body.temperature = opts.temperature;
    if (opts.top_p !== undefined) body.top_p = opts.top_p;
    if (opts.stop && opts.stop.length) body.stop = opts.stop;
    if (opts.seed !== undefined) body.seed = opts.seed;
    if (opts.n !== undefined && opts.n !== 1) body.n = opts.n;
    // tool_choice is left to the server's default ("auto" when tools are given): vLLM rejects an explicit
    // "auto" unless it was started with --enable-auto-tool-choice
    if (opts.tools && opts.tools.length) body.tools = opts.tools;
    const prompt: PromptParts = { messages: body.messages as unknown[], ...(opts.tools && opts.tools.length ? { tools: opts.tools } : {}) };
    const timeoutMs = this.opts.timeoutMs ?? defaultTimeoutMs(opts.max_tokens);
    const send = (url: string, maxTokens: number | undefined) => {
      const text = JSON.stringify(maxTokens === undefined ? body : { ...body, max_tokens: maxTokens });
      return httpCall(url, { method: "POST", body: text, headers: this.headers(), timeoutMs, signal: opts.signal, agent: this.agentFor(url) });
    };
    const once = (base: string) =>
      this.endpoints.use(base, async () => {
        const url = `${base}/chat/completions`;
        const t0 = Date.now();
        let maxTokens = await this.windows.budget(base, prompt, opts.max_tokens);
        let reply = await send(url, maxTokens);
        if (isContextRefusal(reply.status, reply.text)) {
          maxTokens = await this.windows.afterRefusal(base, prompt, opts.max_tokens, maxTokens, reply.text);
          reply = await send(url, maxTokens);
          if (isContextRefusal(reply.status, reply.text)) throw this.windows.refusal(base, reply.text);
        }
        if (reply.status < 200 || reply.status >= 300) throw classifyStatus(reply.status, reply.text, new URL(url).origin, retryAfterMs(reply.headers["retry-after"]));
        let json: unknown;
        try {
          json = JSON.parse(reply.text);
        } catch {
          throw new PolicyError("bad_response", `reply is not JSON: ${reply.text.slice(0, 120)}`, { retryable: true });
        }
        return parseChatReply(json, Date.now() - t0).map((c) => ({ ...c, endpoint: base }));
      });
    return withRetries(
      () =>
        this.limiter.run(async () => {
          // a transient failure moves to an endpoint this attempt has not tried yet, without waiting;
          // when every endpoint failed, the error goes to withRetries, which backs off and starts over
          const tried = new Set<string>();
          for (;;) {
            const base = this.endpoints.pick(tried);
            tried.add(base);
            try {
              return await once(base);
            } catch (e) {
              if (!(e instanceof PolicyError) || !e.retryable || tried.size >= this.endpoints.urls.length || opts.signal?.aborted) throw e;
              opts.onRetry?.(e.reason, 0);
            }
          }
        }),
      { retries: this.opts.retries, baseMs: this.opts.backoffMs, jitterKey: `${opts.seed ?? ""}:${JSON.stringify(body).length}`, onRetry: opts.onRetry, signal: opts.signal },
    );
  }

  /**
   * Waits until the server lists its models (GET /models) and answers a one-token request, polling every
   * `pollMs` for at most `timeoutMs`; servers still loading weights answer 503 or refuse connections meanwhile.
   */
  async warmup(timeoutMs: number, pollMs = 2000): Promise<void> {
    await Promise.all(this.endpoints.urls.map((u) => this.warmupOne(u, timeoutMs, pollMs)));
  }

  private async warmupOne(baseUrl: string, timeoutMs: number, pollMs: number): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    let last = "";
    for (;;) {
      try {
        const r = await httpCall(`${baseUrl}/models`, { headers: this.headers(), timeoutMs: 10_000, agent: this.agentFor(baseUrl) });
        if (r.status >= 200 && r.status < 300 || r.status === 404) {
          await this.complete([{ role: "user", content: "Say OK." }], { max_tokens: 1, temperature: 0 });
          return;
        }
        last = `status ${r.status}`;
        if (r.status === 401 || r.status === 403) throw classifyStatus(r.status, r.text, baseUrl);
      } catch (e) {
        if (e instanceof PolicyError && e.fatal) throw new T2sError("policy_" + e.reason, e.message);
        last = (e as Error).message;
      }
      if (Date.now() >= deadline) throw new T2sError("server_unreachable", `${baseUrl} did not answer within ${Math.round(timeoutMs / 1000)} s (last: ${last}); is the server up?`);
      await sleep(Math.min(pollMs, Math.max(0, deadline - Date.now())));
    }
  }

  async close(): Promise<void> {
    this.agents.http.destroy();
    this.agents.https.destroy();
  }
}

function toWire(m: ChatMessage): Record<string, unknown> {
  const out: Record<string, unknown> = { role: m.role, content: m.content };
  if (m.tool_calls && m.tool_calls.length) out.tool_calls = m.tool_calls;
  if (m.tool_call_id) out.tool_call_id = m.tool_call_id;
  // the tool's name stays in the stored turn; strict servers reject `name` on tool messages
  if (m.name && m.role !== "tool") out.name = m.name;
  return out;
}
