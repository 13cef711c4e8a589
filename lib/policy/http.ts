/**
 * Minimal JSON over HTTP(S) on node:http. Global fetch is avoided on purpose: its built-in 300 s headers
 * and body timeouts would cut long generations before our own per-request timeout decides.
 */
import { request as httpRequest, Agent as HttpAgent, type IncomingMessage } from "node:http";
import { request as httpsRequest, Agent as HttpsAgent } from "node:https";
import { PolicyError } from "./types.js";

export interface HttpReply {
  status: number;
  text: string;
  headers: Record<string, string | string[] | undefined>;
}

export interface HttpOptions {
  method?: "GET" | "POST";
  headers?: Record<string, string>;
  body?: string;
  timeoutMs: number;
  signal?: AbortSignal;
  agent?: HttpAgent | HttpsAgent;
}

/** Keep-alive agents sized for `sockets` parallel requests. */
export function makeAgents(sockets: number): { http: HttpAgent; https: HttpsAgent } {
  return {
    http: new HttpAgent({ keepAlive: true, maxSockets: sockets }),
    https: new HttpsAgent({ keepAlive: true, maxSockets: sockets }),
  };
}

/**
 * Sends one request and returns status and body text. Throws PolicyError "timeout" or "connection"
 * (both retryable) when no complete reply arrives; an abort via `signal` throws PolicyError "aborted".
 */
export function httpCall(url: string, opts: HttpOptions): Promise<HttpReply> {
  const u = new URL(url);
  const send = u.protocol === "https:" ? httpsRequest : httpRequest;
  return new Promise((resolve, reject) => {
    let settled = false;
    const finish = (err: Error | null, reply?: HttpReply) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      opts.signal?.removeEventListener("abort", onAbort);
      if (err) reject(err);
      else resolve(reply!);
    };
    const headers: Record<string, string> = { ...opts.headers };
    if (opts.body !== undefined) {
      headers["content-type"] = "application/json";
      headers["content-length"] = String(Buffer.byteLength(opts.body));
    }
    const req = send(u, { method: opts.method ?? "GET", headers, agent: opts.agent }, (res: IncomingMessage) => {
      const chunks: Buffer[] = [];
      res.on("data", (c: Buffer) => chunks.push(c));
      res.on("end", () => finish(null, { status: res.statusCode ?? 0, text: Buffer.concat(chunks).toString("utf8"), headers: res.headers }));
      res.on("error", (e) => finish(new PolicyError("connection", `reply from ${u.origin} broke off: ${e.message}`, { retryable: true })));
      res.on("aborted", () => finish(new PolicyError("connection", `reply from ${u.origin} broke off`, { retryable: true })));
    });
    const timer = setTimeout(() => {
      finish(new PolicyError("timeout", `no complete reply from ${u.origin} within ${Math.round(opts.timeoutMs / 1000)} s`, { retryable: true }));
      req.destroy();
    }, opts.timeoutMs);
    const onAbort = () => {
      finish(new PolicyError("aborted", "request cancelled"));
      req.destroy();
    };
    if (opts.signal?.aborted) return onAbort();
    opts.signal?.addEventListener("abort", onAbort, { once: true });
    req.on("error", (e: NodeJS.ErrnoException) => {
      finish(new PolicyError("connection", `cannot reach ${u.origin}: ${e.code ?? e.message}`, { retryable: true }));
    });
    if (opts.body !== undefined) req.write(opts.body);
    req.end();
  });
}
