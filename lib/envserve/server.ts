/**
 * `t2s env serve`: the environment service on node:http.
 *   POST /v1/grade   {"items": [{"task_id" | "db"+"gold", "pred", "preset"?, ...}]} -> {"results": [...]}
 *   POST /v1/tool    {"task_id" | "db", "query"} -> {"content", "invalid"} (the episode's tool-turn text)
 *   POST /v1/prompt  {"task_id"} or {"db", "question"} -> {"messages", "tools", "style", "protocol"}
 *   GET  /v1/tasks   -> {"tasks": [{"task_id", "db_id", "split"}]}
 *   GET  /health, GET /metrics (Prometheus text)
 * A bad body is a 400 with {"error": {"message", "code"}}; a missing or wrong key 401; a database outside
 * the allowed ones 403; an unknown task id 404; a wrong method 405; an oversized body 413, sent as soon as
 * the declared (or counted) size passes the limit, without reading the rest.
 * Connections are guarded as `t2s serve`'s are (lib/serve/http-guard.ts): idle ones past
 * `maxIdleConnections` are closed oldest first, open ones are capped (idle, then still-sending ones are
 * evicted; a new one gets a 503 only when all are busy), and headers, bodies and idle sockets have time
 * limits. Without a key, only requests addressed to a loopback name are answered (403 otherwise: DNS
 * rebinding). close() drains: new requests get a 503, grades in flight may finish within the shutdown
 * timeout, then the rest are cut.
 */
import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import type { AddressInfo, Socket } from "node:net";
import { isT2sError } from "../core/errors.js";
import { hasKey, MAX_IDLE_CONNECTIONS } from "./access.js";
import { hostPolicy, hostRefusal, limitConnections, type ConnectionGuard, type ConnectionLimits } from "../serve/http-guard.js";
import { DrainDeadline, SHUTDOWN_TIMEOUT_S } from "../serve/shutdown.js";
import { BadRequest } from "./errors.js";
import type { EnvService } from "./service.js";

export interface EnvServerOptions {
  service: EnvService;
  port?: number;
  host?: string;
  /** Request bodies larger than this are refused with 413 (default 32 MiB: a batch of long replies). */
  maxBodyBytes?: number;
  /** Requests must carry `authorization: Bearer KEY` (or `x-api-key`); /health is answered without it. */
  apiKey?: string;
  /** Connections with no request in flight kept at most (default 256); the oldest idle ones are closed first. */
  maxIdleConnections?: number;
  /** Open connections at most and the time limits on headers, bodies and idle sockets (http-guard.ts's defaults). */
  connections?: ConnectionLimits;
  /** Without a key, Host names answered besides loopback ones and the listen address ("*": any). */
  allowedHosts?: string[];
  /** How long close() lets requests in flight (grades) finish before cutting them (default 30 s). */
  shutdownTimeoutMs?: number;
}

export interface RunningEnvServer {
  /** http://host:port (no trailing slash). */
  url: string;
  /** Drains: new requests get a 503, those in flight may finish within `timeoutMs` (default: the shutdown timeout), then the rest are cut; a later call may only shorten the wait. */
  close(timeoutMs?: number): Promise<void>;
  /** Requests being answered now. */
  inFlight(): number;
  /** What the connection limits did so far. */
  connections: ConnectionGuard;
}

function send(res: ServerResponse, status: number, body: string, type = "application/json"): void {
  res.writeHead(status, { "content-type": type, "content-length": Buffer.byteLength(body) });
  res.end(body);
}

function tooLarge(limit: number): BadRequest {
  return new BadRequest(`request body over ${limit} bytes; send smaller batches`, 413);
}

/** The body as text; an oversized one throws 413 at once (by its declared length, else when the count passes the limit). */
async function readBody(req: IncomingMessage, limit: number): Promise<string> {
  const declared = Number(req.headers["content-length"]);
  if (Number.isFinite(declared) && declared > limit) throw tooLarge(limit);
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const c of req as AsyncIterable<Buffer>) {
    size += c.length;
    if (size > limit) throw tooLarge(limit);
    chunks.push(c);
  }
  return Buffer.concat(chunks).toString("utf8");
}

async function jsonBody(req: IncomingMessage, limit: number): Promise<unknown> {
  const text = await readBody(req, limit);
  if (text.trim() === "") throw new BadRequest("the request body is empty; send a JSON object");
  try {
    return JSON.parse(text);
  } catch (e) {
    throw new BadRequest(`the request body is not valid JSON: ${(e as Error).message}`);
  }
}

const ROUTES: Record<string, "GET" | "POST"> = {
  "/v1/grade": "POST",
  "/v1/tool": "POST",
  "/v1/prompt": "POST",
  "/v1/tasks": "GET",
  "/health": "GET",
  "/metrics": "GET",
};

/** Starts the service on `host:port` (port 0: any free port) and returns its URL and a close function. */
export async function startEnvServer(opts: EnvServerOptions): Promise<RunningEnvServer> {
  const { service } = opts;
  const limit = opts.maxBodyBytes ?? 32 * 1024 * 1024;
  const maxIdle = opts.maxIdleConnections ?? MAX_IDLE_CONNECTIONS;
  const localHost = opts.apiKey === undefined ? hostPolicy(opts.host ?? "127.0.0.1", opts.allowedHosts) : null;
  let inflight = 0;
  let draining = false;
  const handle = async (req: IncomingMessage, res: ServerResponse): Promise<[string, number]> => {
    const path = (req.url ?? "/").split("?")[0];
    const method = ROUTES[path];
    // without a key, a request a web page made through DNS rebinding goes no further
    if (localHost && !localHost(req.headers.host)) {
      res.setHeader("connection", "close");
      send(res, 403, JSON.stringify({ error: { message: hostRefusal(req.headers.host), code: "host_not_allowed" } }));
      return [method ? path : "other", 403];
    }
    if (draining) {
      res.setHeader("connection", "close");
      send(res, 503, JSON.stringify({ error: { message: "the service is shutting down", code: "shutting_down" } }));
      return [method ? path : "other", 503];
    }
    if (opts.apiKey !== undefined && path !== "/health" && !hasKey(req.headers, opts.apiKey)) {
      res.setHeader("www-authenticate", "Bearer");
      send(res, 401, JSON.stringify({ error: { message: "this service needs its API key: send 'Authorization: Bearer KEY' (the Python adapters read T2S_API_KEY)", code: "unauthorized" } }));
      return [method ? path : "other", 401];
    }
    if (!method) {
      send(res, 404, JSON.stringify({ error: { message: `no route ${path}; routes: ${Object.keys(ROUTES).join(", ")}`, code: "not_found" } }));
      return ["other", 404];
    }
    if (req.method !== method) {
      res.setHeader("allow", method);
      send(res, 405, JSON.stringify({ error: { message: `${path} takes ${method}, not ${req.method}`, code: "method_not_allowed" } }));
      return [path, 405];
    }
    let body: unknown;
    switch (path) {
      case "/health":
        send(res, 200, JSON.stringify(service.health()));
        break;
      case "/metrics": {
        const c = service.goldCache;
        send(res, 200, service.metrics.render({ inflight: inflight - 1, goldHits: c.hits, goldMisses: c.misses, goldSize: c.size }), "text/plain; version=0.0.4; charset=utf-8");
        break;
      }
      case "/v1/tasks":
        send(res, 200, JSON.stringify({ tasks: [...service.tasks.values()].map((t) => ({ task_id: t.id, db_id: t.db_id, split: t.split })) }));
        break;
      case "/v1/grade": {
        body = await jsonBody(req, limit);
        // a client that goes away cancels its grading; clients (connections) share grading in turn
        const gone = new AbortController();
        res.once("close", () => {
          if (!res.writableFinished) gone.abort();
        });
        send(res, 200, JSON.stringify({ results: await service.gradeBatch(body, { signal: gone.signal, client: req.socket }) }));
        break;
      }
      case "/v1/tool":
        body = await jsonBody(req, limit);
        send(res, 200, JSON.stringify(await service.tool(body)));
        break;
      case "/v1/prompt":
        body = await jsonBody(req, limit);
        send(res, 200, JSON.stringify(await service.promptFor(body)));
        break;
    }
    return [path, 200];
  };
  const server = createServer((req, res) => {
    const t0 = performance.now();
    const socket = req.socket as Socket | null;
    inflight++;
    handle(req, res)
      .catch((e): [string, number] => {
        const path = (req.url ?? "/").split("?")[0];
        const status = e instanceof BadRequest ? e.status : isT2sError(e, "no_database") ? 400 : 500;
        const codes: Record<number, string> = { 403: "forbidden", 404: "not_found", 413: "too_large" };
        const code = e instanceof BadRequest ? codes[status] ?? "bad_request" : isT2sError(e) ? e.code : "internal";
        // the rest of an oversized body is never read: answer, then close the connection
        if (status === 413) res.setHeader("connection", "close");
        if (!res.headersSent) send(res, status, JSON.stringify({ error: { message: e instanceof Error ? e.message : String(e), code } }));
        if (status === 413) res.once("finish", () => socket?.destroySoon());
        return [path, status];
      })
      .then(([route, status]) => {
        inflight--;
        service.metrics.request(route, status, (performance.now() - t0) / 1000);
      });
  });
  const connections = limitConnections(server, { keepAliveMs: 30_000, ...opts.connections, maxIdleConnections: maxIdle });
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(opts.port ?? 0, opts.host ?? "127.0.0.1", () => resolve());
  });
  const addr = server.address() as AddressInfo;
  const host = addr.family === "IPv6" ? `[${addr.address}]` : addr.address;
  let drain: DrainDeadline | null = null;
  let closing: Promise<void> | null = null;
  const close = async () => {
    draining = true;
    const closed = new Promise<void>((resolve) => server.close(() => resolve()));
    await drain!.until(() => inflight === 0);
    server.closeAllConnections();
    await closed;
  };
  return {
    url: `http://${host}:${addr.port}`,
    close: (timeoutMs = opts.shutdownTimeoutMs ?? SHUTDOWN_TIMEOUT_S * 1000) => {
      if (drain) drain.cut(timeoutMs);
      else drain = new DrainDeadline(timeoutMs);
      return (closing ??= close());
    },
    inFlight: () => inflight,
    connections,
  };
}
