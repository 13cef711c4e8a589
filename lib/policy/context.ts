/**
 * Each request's max_tokens sized to the server's context window. A server refuses a request whose prompt
 * plus max_tokens passes its window (vLLM and `t2s serve` answer 400 "maximum context length"), while an
 * in-process model simply stops at the window; so a budget larger than the room left after the prompt is
 * cut to that room, and the same run scores the same against a server as in process.
 *
 * The client has neither the tokenizer nor the chat template, so the prompt's length is the server's to
 * say. Per endpoint:
 * - the window is read once from GET /models (`max_model_len` of the model's entry, as vLLM and t2s serve
 *   report it); a server that reports none is sent max_tokens as asked;
 * - a request whose budget could pass the window (max_tokens >= the window, or the endpoint has refused a
 *   request for context before) has its prompt counted on the server's tokenize route (POST /tokenize at
 *   the server root, with the request's messages and tools; vLLM and t2s serve have it) and is sent
 *   max_tokens = min(asked, window - prompt); any other request goes as asked, with no extra round trip;
 * - a request refused for context anyway is sized once more from what the refusal says (vLLM's and
 *   t2s serve's messages give the window and the prompt's length) or from the tokenize route, and sent
 *   again.
 * A prompt that alone fills the window, or a refusal nothing can size, is a setup error
 * (PolicyError "context_exceeded", `setup`): the model never saw the task, so it is not the model's failure.
 */
import type { HttpReply } from "./http.js";
import { CONTEXT_EXCEEDED, PolicyError } from "./types.js";

/** What sizing needs from the server: one GET and one POST, both answered with status and body. */
export interface ContextIO {
  get(url: string): Promise<HttpReply>;
  post(url: string, body: string): Promise<HttpReply>;
}

/** The part of a chat request the prompt is made of, in wire form. */
export interface PromptParts {
  messages: unknown[];
  tools?: unknown[];
}

interface EndpointWindow {
  /** Tokens of prompt + completion the model takes; null while unknown. */
  limit: number | null;
  /** The GET /models lookup, started once. */
  looked: Promise<void> | null;
  /** Whether the tokenize route counts prompts (null: not tried yet). */
  tokenize: boolean | null;
  /** The endpoint refused a request for context: count every later prompt before sending it. */
  tight: boolean;
}

/** True when an HTTP refusal says that prompt + max_tokens pass the model's context window. */
export function isContextRefusal(status: number, body: string): boolean {
  return (status === 400 || status === 413 || status === 422) && /context[ _](length|window)|maximum context|too long|maximum.*tokens|input tokens|prompt has \d+ tokens/i.test(body);
}

/** The window and the prompt's length as a refusal states them (vLLM's and t2s serve's wordings); each null when not said. */
export function readContextRefusal(body: string): { limit: number | null; prompt: number | null } {
  const num = (res: RegExp[]) => {
    for (const re of res) {
      const m = re.exec(body);
      if (m) return Number(m[1]);
    }
    return null;
  };
  return {
    limit: num([/maximum context length is (\d+)/i, /takes at most (\d+)/i, /max_model_len[^0-9]{0,8}(\d+)/i]),
    prompt: num([/(\d+) in the (?:messages|prompt)/i, /has (\d+) input tokens/i, /prompt has (\d+) tokens/i, /(\d+) (?:input|prompt) tokens/i]),
  };
}

/** The server root of an OpenAI base URL (".../v1" without "/v1"), where vLLM and t2s serve put /tokenize. */
export function serverRoot(baseUrl: string): string {
  return baseUrl.replace(/\/v1\/?$/, "");
}

export class ContextWindows {
  private readonly windows = new Map<string, EndpointWindow>();

  constructor(private readonly model: string, private readonly io: ContextIO) {}

  private window(base: string): EndpointWindow {
    let w = this.windows.get(base);
    if (!w) this.windows.set(base, (w = { limit: null, looked: null, tokenize: null, tight: false }));
    return w;
  }

  /** The model's window at `base` as last learnt (null: unknown). */
  limit(base: string): number | null {
    return this.windows.get(base)?.limit ?? null;
  }

  private async lookUp(base: string, w: EndpointWindow): Promise<void> {
    w.looked ??= (async () => {
      let r;
      try {
        r = await this.io.get(`${base}/models`);
      } catch {
        // not reachable yet (a server still starting): the next request asks again
        w.looked = null;
        return;
      }
      if (r.status < 200 || r.status >= 300) return;
      try {
        const data = (JSON.parse(r.text) as { data?: Array<{ id?: unknown; max_model_len?: unknown }> }).data;
        const entry = Array.isArray(data) ? data.find((m) => m && m.id === this.model) : undefined;
        const len = entry?.max_model_len;
        if (typeof len === "number" && Number.isInteger(len) && len > 0) w.limit ??= len;
      } catch {
        // not JSON: the window stays unknown and requests go as asked
      }
    })();
    await w.looked;
  }

  /** The prompt's tokens as the server's tokenize route counts them, or null when it has no usable route. */
  private async count(base: string, w: EndpointWindow, parts: PromptParts): Promise<number | null> {
    if (w.tokenize === false) return null;
    const body: Record<string, unknown> = { model: this.model, messages: parts.messages, add_generation_prompt: true };
    if (parts.tools && parts.tools.length) body.tools = parts.tools;
    const r = await this.io.post(`${serverRoot(base)}/tokenize`, JSON.stringify(body));
    let count: unknown;
    let limit: unknown;
    try {
      ({ count, max_model_len: limit } = JSON.parse(r.text) as { count?: unknown; max_model_len?: unknown });
    } catch {
      count = undefined;
    }
    if (isContextRefusal(r.status, r.text)) {
      // t2s serve refuses to tokenize a prompt whose bytes alone cannot fit the window
      throw new PolicyError(CONTEXT_EXCEEDED, `${new URL(base).origin} refused the prompt as longer than ${this.model}'s context: ${r.text.slice(0, 300).replace(/\s+/g, " ")}`, { setup: true, status: r.status });
    }
    if (r.status < 200 || r.status >= 300 || typeof count !== "number") {
      // a refused key is the completion's to report, and a busy server (429, 5xx) may count next time;
      // anything else (no such route, fields it does not take): this server cannot count
      if (r.status !== 401 && r.status !== 403 && r.status !== 429 && r.status < 500) w.tokenize = false;
      return null;
    }
    w.tokenize = true;
    if (typeof limit === "number" && Number.isInteger(limit) && limit > 0) w.limit ??= limit;
    return count;
  }

  private tooLong(origin: string, prompt: number, limit: number): PolicyError {
    return new PolicyError(
      CONTEXT_EXCEEDED,
      `the prompt has ${prompt} tokens and ${this.model} at ${origin} takes ${limit} in all (max_model_len): no room for a reply. ` +
        `Serve the model with a longer context, or shorten the prompt (fewer --tool-rows, single style)`,
      { setup: true },
    );
  }

  private fit(base: string, asked: number, prompt: number, limit: number): number {
    if (prompt >= limit) throw this.tooLong(new URL(base).origin, prompt, limit);
    return Math.min(asked, limit - prompt);
  }

  /**
   * The max_tokens to send to `base` for a request asking `asked` (undefined: none is sent, the server
   * fills the room itself). Throws the setup error when the prompt alone fills the window.
   */
  async budget(base: string, parts: PromptParts, asked: number | undefined): Promise<number | undefined> {
    if (asked === undefined) return undefined;
    const w = this.window(base);
    await this.lookUp(base, w);
    if (w.limit === null || (asked < w.limit && !w.tight)) return asked;
    const prompt = await this.count(base, w, parts);
    return prompt === null ? asked : this.fit(base, asked, prompt, w.limit);
  }

  /**
   * After `base` refused a request sent with max_tokens `sent` for context (`body` the refusal): the
   * max_tokens to send it once more with. Throws the setup error when the prompt alone fills the window or
   * nothing says how long it is.
   */
  async afterRefusal(base: string, parts: PromptParts, asked: number | undefined, sent: number | undefined, body: string): Promise<number> {
    const w = this.window(base);
    w.tight = true;
    const said = readContextRefusal(body);
    if (said.limit !== null) w.limit = said.limit;
    const prompt = said.prompt ?? (w.limit !== null ? await this.count(base, w, parts) : null);
    if (prompt !== null && w.limit !== null) {
      const retry = this.fit(base, asked ?? w.limit, prompt, w.limit);
      if (sent === undefined || retry < sent) return retry;
    }
    throw this.refusal(base, body);
  }

  /** The setup error for a context refusal of `base` that sizing could not resolve (`body` the refusal). */
  refusal(base: string, body: string): PolicyError {
    const detail = body.slice(0, 300).replace(/\s+/g, " ");
    return new PolicyError(
      CONTEXT_EXCEEDED,
      `${new URL(base).origin} refused the request as longer than ${this.model}'s context: ${detail}. ` +
        `Pass a smaller --max-tokens, or serve the model with a longer context`,
      { setup: true, status: 400 },
    );
  }
}
