/**
 * What both of the kit's HTTP servers (`t2s serve`, `t2s env serve`) do before a request reaches a route,
 * on a plain node:http server so either framework can use it:
 * - API keys: a blank key is a usage error (it would start a server that checks nothing), and a key is
 *   compared as a digest in constant time.
 * - The Host check: a server without a key answers only requests addressed to a loopback name, so a web
 *   page cannot drive it through DNS rebinding (its requests carry the page's own host name); other names
 *   are allowed by `--allowed-host` (Jupyter Server's local_hostnames / allow_remote_access, one flag).
 * - Connections: a cap on open sockets that evicts the one doing no work for the longest (idle, or still
 *   sending its request), and refuses a new one with a 503 only when every socket is doing work; time
 *   limits on a request's headers, on its whole body (a body trickled a byte a second is cut like slowloris
 *   headers) and on an idle keep-alive socket. A response being written (an SSE stream) is never timed out.
 */
import { createHash, timingSafeEqual } from "node:crypto";
import { isIP, type Socket } from "node:net";
import type { IncomingMessage, Server } from "node:http";
import { UsageError } from "../core/errors.js";

/** A key given on the command line or in the environment: undefined when none, a usage error when blank. */
export function apiKeyOption(value: string | undefined, source: string): string | undefined {
  if (value === undefined) return undefined;
  if (value.trim() === "") throw new UsageError(`${source} is empty: give a key (a server with an empty key would check nothing), or leave it out to serve without one`);
  return value;
}

function digest(s: string): Buffer {
  return createHash("sha256").update(s).digest();
}

/** Whether `given` is `key`, in time independent of where (and whether) they differ. */
export function keyMatches(given: string, key: string): boolean {
  return timingSafeEqual(digest(given), digest(key));
}

/** Whether a listen host or a Host name is a loopback address or name. */
export function isLoopback(host: string): boolean {
  const h = host.replace(/^\[|\]$/g, "").toLowerCase();
  return h === "localhost" || h.endsWith(".localhost") || h === "::1" || /^127(\.\d{1,3}){3}$/.test(h) || h === "::ffff:127.0.0.1";
}

/** The name part of a Host header value ("[::1]:8000" -> "::1", "Example.org:80" -> "example.org"). */
export function hostName(header: string): string {
  const h = header.trim().toLowerCase();
  if (h.startsWith("[")) return h.slice(1, h.indexOf("]") > 0 ? h.indexOf("]") : undefined);
  const colon = h.lastIndexOf(":");
  return colon >= 0 && h.indexOf(":") === colon ? h.slice(0, colon) : h;
}

/**
 * The Host names a keyless server answers: loopback names, the address it listens on (as its URL shows
 * it), and `allowed` ("*" allows any).
 */
export function hostPolicy(listenHost: string, allowed: readonly string[] = []): (header: string | undefined) => boolean {
  const names = new Set(allowed.map((a) => hostName(a)));
  const listen = hostName(listenHost.includes(":") && !listenHost.startsWith("[") ? `[${listenHost}]` : listenHost);
  // the address it listens on, as its URL shows it (a wildcard 0.0.0.0 too: an IP literal is no DNS name to rebind)
  if (isIP(listen)) names.add(listen);
  if (names.has("*")) return () => true;
  return (header) => {
    if (!header) return false;
    const name = hostName(header);
    return isLoopback(name) || names.has(name);
  };
}

/** Why a request to a keyless server was refused for its Host header (a 403). */
export function hostRefusal(header: string | undefined): string {
  const shown = (header ?? "").slice(0, 200);
  return `Host '${shown}' is not allowed: without an API key this server answers only requests addressed to localhost, 127.0.0.1 or [::1] (so a web page cannot reach it through DNS rebinding); give the server --api-key, or --allowed-host ${hostName(shown) || "NAME"} to allow this name`;
}

export interface ConnectionLimits {
  /** Open connections at most, busy ones included (default 1024): see limitConnections. */
  maxConnections?: number;
  /** Idle connections (no request in flight) kept at most, the longest-idle closed first (default: maxConnections). */
  maxIdleConnections?: number;
  /** An idle keep-alive socket is closed after this many ms (default 65 s: longer than clients' pools keep them). */
  keepAliveMs?: number;
  /** A new connection must send its request headers within this many ms (default 20 s). */
  headersMs?: number;
  /** A request's whole body must arrive within this many ms of its headers (default 60 s). */
  requestMs?: number;
}

/** The defaults of both servers, each read from here. */
export const CONNECTION_LIMITS: Readonly<Required<Omit<ConnectionLimits, "maxIdleConnections">>> = { maxConnections: 1024, keepAliveMs: 65_000, headersMs: 20_000, requestMs: 60_000 };

/** What the connection guard did so far (for tests and metrics). */
export interface ConnectionGuard {
  /** Sockets open now. */
  open(): number;
  /** Sockets closed to make room (idle or still sending their request). */
  evicted(): number;
  /** Sockets closed because their headers, body or idle time ran past its limit. */
  timedOut(): number;
  /** Connections answered 503 because every open socket was busy. */
  refused(): number;
}

interface SocketState {
  /** Requests received on it whose response has not closed. */
  active: number;
  /** The latest request, to tell one still being received (its body incomplete) from one being answered. */
  req: IncomingMessage | null;
  /** performance.now() when it last became idle, or when its latest request started. */
  since: number;
  timer: NodeJS.Timeout | null;
}

const BUSY = JSON.stringify({ error: { message: "the server has as many connections as it takes, all busy; retry shortly", type: "server_error", code: "too_many_connections" } });

/**
 * Applies the limits to a listening node:http server. Past `maxConnections` the socket doing no work for
 * the longest is closed (idle since its last response, or still sending a request it started then), else
 * the new connection is answered 503 and closed: so sockets that hold a slot without finishing a request
 * never keep a client with a real request out. Each socket is on one clock at a time: its first headers (`headersMs`), a
 * request's body (`requestMs`, from its headers), idle keep-alive (`keepAliveMs`).
 */
export function limitConnections(server: Server, limits: ConnectionLimits = {}): ConnectionGuard {
  const cap = Math.max(1, limits.maxConnections ?? CONNECTION_LIMITS.maxConnections);
  const idleCap = Math.max(0, limits.maxIdleConnections ?? cap);
  const keepAliveMs = limits.keepAliveMs ?? CONNECTION_LIMITS.keepAliveMs;
  const headersMs = limits.headersMs ?? CONNECTION_LIMITS.headersMs;
  const requestMs = limits.requestMs ?? CONNECTION_LIMITS.requestMs;
  // node's own clocks as a backstop (checked on its own interval); the socket clocks below are exact
  server.keepAliveTimeout = keepAliveMs;
  server.headersTimeout = headersMs;
  server.requestTimeout = headersMs + requestMs;
  const sockets = new Map<Socket, SocketState>();
  let evicted = 0;
  let timedOut = 0;
  let refused = 0;

  const receiving = (st: SocketState) => st.active > 0 && st.req !== null && !st.req.complete;
  const idle = (st: SocketState) => st.active === 0;
  const arm = (socket: Socket, st: SocketState, ms: number, expired: () => boolean) => {
    if (st.timer) clearTimeout(st.timer);
    st.timer = setTimeout(() => {
      st.timer = null;
      if (!expired()) return;
      timedOut++;
      socket.destroy();
    }, ms);
    st.timer.unref();
  };
  /** The open socket of a kind that has waited longest, if any. */
  const oldest = (keep: Socket, kind: (st: SocketState) => boolean): Socket | null => {
    let found: Socket | null = null;
    let since = Infinity;
    for (const [s, st] of sockets) if (s !== keep && kind(st) && st.since < since) {
      found = s;
      since = st.since;
    }
    return found;
  };

  server.on("connection", (socket: Socket) => {
    const st: SocketState = { active: 0, req: null, since: performance.now(), timer: null };
    sockets.set(socket, st);
    socket.once("close", () => {
      if (st.timer) clearTimeout(st.timer);
      sockets.delete(socket);
    });
    // a socket that never sends a request is idle from the start, and must send its headers in time
    arm(socket, st, headersMs, () => idle(st));
    let idleCount = 0;
    for (const x of sockets.values()) if (idle(x)) idleCount++;
    if (idleCount > idleCap) {
      const victim = oldest(socket, idle);
      if (victim) {
        evicted++;
        victim.destroy();
      }
    }
    if (sockets.size <= cap) return;
    // of the sockets doing no work (idle, or stalled in a request), the one stalled longest: a client that
    // just finished a request keeps its socket, a trickling body that started long ago loses it
    const victim = oldest(socket, (st) => idle(st) || receiving(st));
    if (victim) {
      evicted++;
      victim.destroy();
      return;
    }
    refused++;
    socket.end(`HTTP/1.1 503 Service Unavailable\r\nconnection: close\r\ncontent-type: application/json\r\ncontent-length: ${Buffer.byteLength(BUSY)}\r\n\r\n${BUSY}`);
    socket.destroySoon();
  });

  server.on("request", (req: IncomingMessage, res) => {
    const socket = req.socket;
    const st = sockets.get(socket);
    if (!st) return;
    st.active++;
    st.req = req;
    st.since = performance.now();
    // the body must be in within requestMs; once it is, the response may take as long as it takes
    arm(socket, st, requestMs, () => receiving(st));
    res.once("close", () => {
      st.active--;
      if (st.active > 0) return;
      st.since = performance.now();
      arm(socket, st, keepAliveMs, () => idle(st));
    });
  });

  return { open: () => sockets.size, evicted: () => evicted, timedOut: () => timedOut, refused: () => refused };
}
