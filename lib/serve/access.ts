/**
 * Who may reach `t2s serve`: the API key (vLLM's `--api-key` / VLLM_API_KEY, as a Bearer token), the Host
 * check of a keyless server, and JSON bodies only under a JSON Content-Type (so a cross-origin
 * `text/plain` form post from a web page is refused before it is read). The pieces both servers share
 * (key checks, Host names, connection limits) are in http-guard.ts.
 */
import type { FastifyInstance, FastifyRequest } from "fastify";
import { RequestError } from "./params.js";
import { errorBody } from "./protocol.js";
import { hostPolicy, hostRefusal, keyMatches } from "./http-guard.js";

export { isLoopback, limitConnections, type ConnectionLimits } from "./http-guard.js";

/**
 * The one route answered without the key: liveness. With a key set, /health says only that the server is
 * up unless the request carries the key (what it serves, its adapters and its load are for key holders, as
 * /v1/models is); /metrics needs the key like every other route.
 */
const OPEN_ROUTES = new Set(["/health"]);

/** Whether a request carries `Authorization: Bearer <key>`. */
export function hasBearerKey(req: FastifyRequest, key: string): boolean {
  const m = /^Bearer\s+(.+)$/i.exec(req.headers.authorization ?? "");
  return m !== null && keyMatches(m[1].trim(), key);
}

/** Requires `Authorization: Bearer <key>` on every route but the open ones; a wrong or missing key is a 401. */
export function requireApiKey(app: FastifyInstance, key: string): void {
  app.addHook("onRequest", async (req, reply) => {
    if (OPEN_ROUTES.has(req.url.split("?")[0])) return;
    if (hasBearerKey(req, key)) return;
    await reply.code(401).send(errorBody(new RequestError(401, "Unauthorized: give the server's API key as 'Authorization: Bearer <key>'", { code: "invalid_api_key", type: "authentication_error" })));
  });
}

/** Refuses (403) a request whose Host header is not a loopback name, the listen address or an allowed name: for keyless servers. */
export function requireLocalHost(app: FastifyInstance, listenHost: string, allowed: readonly string[] = []): void {
  const ok = hostPolicy(listenHost, allowed);
  app.addHook("onRequest", async (req, reply) => {
    if (ok(req.headers.host)) return;
    reply.header("connection", "close");
    await reply.code(403).send(errorBody(new RequestError(403, hostRefusal(req.headers.host), { code: "host_not_allowed", type: "permission_error" })));
  });
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
