/**
 * Who may reach `t2s serve` and how much of it they may hold: the API key (vLLM's `--api-key` /
 * VLLM_API_KEY, as a Bearer token), JSON bodies only under a JSON Content-Type (so a cross-origin
 * `text/plain` form post from a web page is refused before it is read), and a cap on open connections
 * that evicts idle sockets first, so thousands of idle clients cannot make the server unreachable.
 */
import { timingSafeEqual, createHash } from "node:crypto";
import type { Server } from "node:http";
import type { Socket } from "node:net";
import type { FastifyInstance } from "fastify";
import { RequestError } from "./params.js";
import { errorBody } from "./protocol.js";

/** Routes answered without the key: liveness and Prometheus scraping (as vLLM leaves them open). */
const OPEN_ROUTES = new Set(["/health", "/metrics", "/ping", "/version"]);

function digest(s: string): Buffer {
  return createHash("sha256").update(s).digest();
}

/** Requires `Authorization: Bearer <key>` on every route but the open ones; a wrong or missing key is a 401. */
export function requireApiKey(app: FastifyInstance, key: string): void {
  const want = digest(key);
  app.addHook("onRequest", async (req, reply) => {
    if (OPEN_ROUTES.has(req.url.split("?")[0])) return;
    const auth = req.headers.authorization ?? "";
    const m = /^Bearer\s+(.+)$/i.exec(auth);
    if (m && timingSafeEqual(digest(m[1].trim()), want)) return;
    await reply.code(401).send(errorBody(new RequestError(401, "Unauthorized: give the server's API key as 'Authorization: Bearer <key>'", { code: "invalid_api_key", type: "authentication_error" })));
  });
}

/** Whether a listen host is a loopback address (or name). */
export function isLoopback(host: string): boolean {
  const h = host.replace(/^\[|\]$/g, "").toLowerCase();
  return h === "localhost" || h === "::1" || /^127\.\d+\.\d+\.\d+$/.test(h) || h === "::ffff:127.0.0.1";
}

const utf8 = new TextDecoder("utf-8", { fatal: true });

/** Body parsing: JSON under a JSON content type (application/json, +json); any other type is a 415. */
export function jsonBodiesOnly(app: FastifyInstance): void {
  app.removeAllContentTypeParsers();
  app.addContentTypeParser(/^application\/([\w.+-]+\+)?json(\s*;.*)?$/i, { parseAs: "buffer" }, (_req, body, done) => {
    let text: string;
    try {
      text = utf8.decode(body as Buffer);
    } catch {
      return done(new RequestError(400, "the request body is not valid UTF-8", { param: "body" }), undefined);
    }
    if (text.trim() === "") return done(null, undefined);
    try {
      done(null, JSON.parse(text));
    } catch (e) {
      done(new RequestError(400, `the request body is not valid JSON: ${(e as Error).message}`, { param: "body" }), undefined);
    }
  });
  app.addContentTypeParser("*", (req, _payload, done) => {
    done(new RequestError(415, `request bodies must be JSON with 'Content-Type: application/json' (got '${String(req.headers["content-type"] ?? "")}')`, { code: "unsupported_media_type" }), undefined);
  });
}

export interface ConnectionLimits {
  /** Open connections at most (default 1024): past it the longest-idle socket is closed, or the new one when none is idle. */
  maxConnections?: number;
  /** Keep-alive sockets with no request are closed after this many ms (default 65 s: longer than clients' pools keep them). */
  keepAliveMs?: number;
  /** A connection that has not sent its request headers in this many ms is closed (default 20 s). */
  headersMs?: number;
}

/** Applies the connection limits to a listening node:http server; returns how many sockets it evicted so far. */
export function limitConnections(server: Server, limits: ConnectionLimits = {}): { evicted: () => number; open: () => number } {
  const cap = Math.max(1, limits.maxConnections ?? 1024);
  server.keepAliveTimeout = limits.keepAliveMs ?? 65_000;
  server.headersTimeout = limits.headersMs ?? 20_000;
  const sockets = new Map<Socket, { active: number; idleSince: number }>();
  let evicted = 0;
  server.on("connection", (socket: Socket) => {
    // a socket that never sends a request is idle from the start
    sockets.set(socket, { active: 0, idleSince: performance.now() });
    socket.once("close", () => sockets.delete(socket));
    // one listener for the socket's life: an idle socket (no request in flight) that times out is closed;
    // fresh sockets get headersMs (node checks headersTimeout only once bytes arrive), used ones keepAliveMs
    socket.on("timeout", () => {
      const s = sockets.get(socket);
      if (s && s.active === 0) socket.destroy();
    });
    socket.setTimeout(server.headersTimeout);
    if (sockets.size <= cap) return;
    let oldest: Socket | null = null;
    let since = Infinity;
    for (const [s, st] of sockets) if (s !== socket && st.active === 0 && st.idleSince < since) {
      oldest = s;
      since = st.idleSince;
    }
    evicted++;
    (oldest ?? socket).destroy();
  });
  server.on("request", (req, res) => {
    const st = sockets.get(req.socket);
    if (!st) return;
    st.active++;
    req.socket.setTimeout(0);
    res.once("close", () => {
      st.active--;
      st.idleSince = performance.now();
      if (st.active === 0) req.socket.setTimeout(server.keepAliveTimeout);
    });
  });
  return { evicted: () => evicted, open: () => sockets.size };
}
