/**
 * `t2s serve`: an OpenAI-compatible HTTP server on node:http. POST /v1/chat/completions (streaming and
 * not), GET /v1/models, GET /health. The base model is served under its name and each LoRA adapter under
 * its own (merged into a copy of the weights that shares everything else with the base). Requests that
 * arrive together are generated as one batch.
 */
import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { isT2sError } from "../errors.js";
import { mergedModel } from "../model/lora.js";
import type { CausalLM } from "../model/model.js";
import { ChatEngine } from "../model/chat.js";
import { chunkBody, completionBody, errorBody, newId, parseChatBody, RequestError, toolCallsDelta, usageBody } from "./protocol.js";

export interface ServerOptions {
  model: CausalLM;
  /** Adapters to serve: name -> PEFT folder (merged on start), or models already built. */
  adapters?: Record<string, string> | CausalLM[];
  port?: number;
  host?: string;
  /** Sequences decoded together per served model (default 64); later requests wait their turn. */
  maxBatch?: number;
  /** Request bodies larger than this are refused (default 8 MiB). */
  maxBodyBytes?: number;
}

export interface RunningServer {
  url: string;
  engine: ChatEngine;
  close(): Promise<void>;
}

function sendJson(res: ServerResponse, status: number, body: unknown): void {
  const text = JSON.stringify(body);
  res.writeHead(status, { "content-type": "application/json", "content-length": Buffer.byteLength(text) });
  res.end(text);
}

function readBody(req: IncomingMessage, limit: number): Promise<string> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    req.on("data", (c: Buffer) => {
      size += c.length;
      if (size > limit) {
        reject(new RequestError(413, `request body over ${limit} bytes`));
        req.destroy();
      } else chunks.push(c);
    });
    req.on("end", () => resolve(Buffer.concat(chunks).toString("utf8")));
    req.on("error", reject);
  });
}

/** Maps any failure to the RequestError the client sees. */
function asRequestError(e: unknown): RequestError {
  if (e instanceof RequestError) return e;
  if (isT2sError(e, "model_not_found")) return new RequestError(404, e.message, { param: "model", code: "model_not_found" });
  if (isT2sError(e, "context_length_exceeded")) return new RequestError(400, e.message, { param: "messages", code: "context_length_exceeded" });
  if (isT2sError(e, "chat_template_failed") || isT2sError(e, "usage")) return new RequestError(400, e.message);
  return new RequestError(500, e instanceof Error ? e.message : String(e));
}

async function chatCompletions(engine: ChatEngine, req: IncomingMessage, res: ServerResponse, maxBody: number): Promise<void> {
  let body: unknown;
  const text = await readBody(req, maxBody);
  try {
    body = JSON.parse(text);
  } catch (e) {
    throw new RequestError(400, `the request body is not valid JSON: ${(e as Error).message}`, { param: "body" });
  }
  const parsed = parseChatBody(body);
  engine.model(parsed.model);
  const id = newId("chatcmpl");
  const created = Math.floor(Date.now() / 1000);
  if (!parsed.stream) {
    const abort = new AbortController();
    res.on("close", () => !res.writableFinished && abort.abort());
    const result = await engine.complete(parsed, { signal: abort.signal });
    const tok = engine.model(parsed.model).requireTokenizer();
    sendJson(res, 200, completionBody(id, created, result, parsed.logprobs ? (t) => tok.decode([t]) : undefined));
    return;
  }
  // validate the prompt before the 200 header goes out, so template errors are still plain 400s
  engine.promptIds(parsed);
  res.writeHead(200, { "content-type": "text/event-stream", "cache-control": "no-cache", connection: "keep-alive" });
  const send = (obj: unknown) => res.write(`data: ${JSON.stringify(obj)}\n\n`);
  const n = parsed.n ?? 1;
  for (let i = 0; i < n; i++) send(chunkBody(id, created, parsed.model, i, { role: "assistant", content: "" }, null));
  // with tools the reply is held back until it can be split into content and tool calls
  const live = !parsed.tools;
  try {
    const abort = new AbortController();
    res.on("close", () => !res.writableFinished && abort.abort());
    const result = await engine.complete(parsed, { signal: abort.signal, onText: live ? (i, delta) => send(chunkBody(id, created, parsed.model, i, { content: delta }, null)) : undefined });
    for (const c of result.choices) {
      if (!live) {
        if (c.content) send(chunkBody(id, created, parsed.model, c.index, { content: c.content }, null));
        if (c.toolCalls.length) send(chunkBody(id, created, parsed.model, c.index, toolCallsDelta(c.toolCalls), null));
      }
      send(chunkBody(id, created, parsed.model, c.index, {}, c.finishReason));
    }
    if (parsed.includeUsage) send({ id, object: "chat.completion.chunk", created, model: parsed.model, choices: [], usage: usageBody(result) });
  } catch (e) {
    send(errorBody(asRequestError(e)));
  }
  res.write("data: [DONE]\n\n");
  res.end();
}

/** Starts the server and returns its URL (port 0 picks a free port) and a close function. */
export async function startServer(opts: ServerOptions): Promise<RunningServer> {
  const adapters = Array.isArray(opts.adapters) ? opts.adapters : Object.entries(opts.adapters ?? {}).map(([name, dir]) => mergedModel(opts.model, dir, { name }));
  const engine = new ChatEngine(opts.model, adapters, { maxBatch: opts.maxBatch });
  const maxBody = opts.maxBodyBytes ?? 8 * 1024 * 1024;
  const created = Math.floor(Date.now() / 1000);
  const server = createServer((req, res) => {
    const path = (req.url ?? "/").split("?")[0].replace(/\/+$/, "") || "/";
    const handle = async () => {
      if (path === "/health" && req.method === "GET") {
        return sendJson(res, 200, { status: "ok", model: engine.baseName, backend: opts.model.backend, models: [...engine.models.keys()], ...engine.load() });
      }
      if (path === "/v1/models" && req.method === "GET") {
        return sendJson(res, 200, {
          object: "list",
          data: [...engine.models.values()].map((m) => ({ id: m.name, object: "model", created, owned_by: "t2s-lab", root: m.name, parent: m.name === engine.baseName ? null : engine.baseName })),
        });
      }
      if (path === "/v1/chat/completions") {
        if (req.method !== "POST") throw new RequestError(405, "use POST for /v1/chat/completions");
        return await chatCompletions(engine, req, res, maxBody);
      }
      throw new RequestError(404, `no route ${req.method} ${path}; this server has POST /v1/chat/completions, GET /v1/models, GET /health`);
    };
    handle().catch((e) => {
      const err = asRequestError(e);
      if (res.headersSent) res.end();
      else sendJson(res, err.status, errorBody(err));
    });
  });
  // clients keep connections open between requests while their episodes wait for a batch; Node's 5 s
  // keep-alive default closes such a socket just as a client reuses it (a reset the client must retry),
  // and a request may legitimately queue for minutes behind big batches
  server.keepAliveTimeout = 65_000;
  server.headersTimeout = 66_000;
  server.requestTimeout = 0;
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(opts.port ?? 8000, opts.host ?? "127.0.0.1", () => resolve());
  });
  const addr = server.address() as AddressInfo;
  const host = addr.family === "IPv6" ? `[${addr.address}]` : addr.address;
  return {
    url: `http://${host}:${addr.port}`,
    engine,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections?.();
        server.close(() => {
          void engine.close().then(() => {
            for (const m of adapters) m.dispose();
            resolve();
          });
        });
      }),
  };
}
