/**
 * `t2s serve`: an OpenAI- and vLLM-compatible HTTP server on fastify (routing, body limits, graceful close).
 * Every served model (the base under its name, each LoRA adapter merged into a copy of the weights under
 * its own) has one generation engine that batches requests continuously: a request joins the running batch
 * at the next decode step, in arrival order within `maxBatch` rows.
 */
import Fastify, { type FastifyReply, type FastifyRequest } from "fastify";
import type { AddressInfo } from "node:net";
import { ChatEngine, renderChat } from "../model/chat.js";
import { mergedModel } from "../model/lora.js";
import type { CausalLM } from "../model/model.js";
import { chatCompletions, type ServeContext } from "./chat-route.js";
import { completions } from "./completions.js";
import { asRequestError } from "./errors.js";
import { ServeMetrics } from "./metrics.js";
import { bad, optTokenIds, refuseUnsupported, RequestError } from "./params.js";
import { errorBody, parseMessages, parseTemplateKwargs, parseTools, requestObject } from "./protocol.js";
import { TokenizerPool } from "./tokenize-pool.js";

export interface ServerOptions {
  model: CausalLM;
  /** Adapters to serve: name -> PEFT folder (merged on start), or models already built. */
  adapters?: Record<string, string> | CausalLM[];
  port?: number;
  host?: string;
  /** Sequences decoded together per served model (default 64); later requests wait their turn. */
  maxBatch?: number;
  /**
   * Prompt tokens prefilled in one engine call at most (vLLM's --max-num-batched-tokens): a smaller budget
   * admits a burst of prompts over several steps, so running streams and /health are never held up long.
   */
  maxPrefillTokens?: number;
  /** Request bodies larger than this are refused (default 8 MiB). */
  maxBodyBytes?: number;
}

export interface RunningServer {
  url: string;
  engine: ChatEngine;
  close(): Promise<void>;
}

const ROUTES = "POST /v1/chat/completions, POST /v1/completions, GET /v1/models[/{id}], POST /tokenize, POST /detokenize, POST /v1/load_lora_adapter, POST /v1/unload_lora_adapter, GET /metrics, GET /health";
const TOKENIZE_KEYS = new Set(["model", "prompt", "messages", "tools", "add_generation_prompt", "add_special_tokens", "return_token_strs", "chat_template_kwargs"]);

/** Starts the server and returns its URL (port 0 picks a free port) and a close function. */
export async function startServer(opts: ServerOptions): Promise<RunningServer> {
  const adapters = Array.isArray(opts.adapters) ? opts.adapters : Object.entries(opts.adapters ?? {}).map(([name, dir]) => mergedModel(opts.model, dir, { name }));
  const baseTok = opts.model.requireTokenizer();
  const pool = await TokenizerPool.start(baseTok, opts.model.dir);
  const encode = (m: CausalLM, text: string, addSpecialTokens: boolean): Promise<number[]> => {
    if (m.tokenizer === baseTok) return pool.encode(text, { addSpecialTokens, maxPositions: m.config.maxPositions });
    try {
      pool.checkBytes(Buffer.byteLength(text), m.config.maxPositions);
      return Promise.resolve(m.requireTokenizer().encode(text, { addSpecialTokens }));
    } catch (e) {
      return Promise.reject(e);
    }
  };
  const chat = new ChatEngine(opts.model, adapters, { maxBatch: opts.maxBatch, maxPrefillTokens: opts.maxPrefillTokens, tokenize: encode });
  const ctx: ServeContext = { chat, metrics: new ServeMetrics(chat), encode, checkBytes: (m, bytes) => pool.checkBytes(bytes, m.config.maxPositions) };
  const created = Math.floor(Date.now() / 1000);
  const loading = new Set<string>();
  const app = Fastify({
    bodyLimit: opts.maxBodyBytes ?? 8 * 1024 * 1024,
    // clients keep connections open between requests while their episodes wait; Node's 5 s keep-alive
    // default closes such a socket just as a client reuses it, and a request may queue for minutes
    keepAliveTimeout: 65_000,
    requestTimeout: 0,
    forceCloseConnections: true,
    routerOptions: { ignoreTrailingSlash: true },
    logger: false,
  });
  app.server.headersTimeout = 66_000;
  // every body is JSON whatever its content type says (curl -d sends form encoding)
  app.removeAllContentTypeParsers();
  app.addContentTypeParser("*", { parseAs: "string" }, (_req, body, done) => {
    const text = String(body);
    if (text.trim() === "") return done(null, undefined);
    try {
      done(null, JSON.parse(text));
    } catch (e) {
      done(new RequestError(400, `the request body is not valid JSON: ${(e as Error).message}`, { param: "body" }), undefined);
    }
  });
  app.setErrorHandler((e, _req, reply) => {
    const err = asRequestError(e);
    void reply.code(err.status).send(errorBody(err));
  });
  app.setNotFoundHandler((req, reply) => {
    void reply.code(404).send(errorBody(new RequestError(404, `no route ${req.method} ${req.url.split("?")[0]}; this server has ${ROUTES}`)));
  });

  const modelCard = (m: CausalLM) => ({ id: m.name, object: "model", created, owned_by: "t2s-lab", root: m.name, parent: m.name === chat.baseName ? null : chat.baseName, max_model_len: m.config.maxPositions });
  app.get("/health", async () => ({ status: "ok", model: chat.baseName, backend: opts.model.backend, models: [...chat.models.keys()], ...chat.load() }));
  app.get("/v1/models", async () => ({ object: "list", data: [...chat.models.values()].map(modelCard) }));
  app.get<{ Params: { id: string } }>("/v1/models/:id", async (req) => modelCard(chat.model(req.params.id)));
  app.get("/metrics", async (_req, reply) => reply.type("text/plain; version=0.0.4; charset=utf-8").send(ctx.metrics.text()));
  app.post("/v1/chat/completions", (req: FastifyRequest, reply: FastifyReply) => chatCompletions(ctx, req.body, reply));
  app.post("/v1/completions", (req: FastifyRequest, reply: FastifyReply) => completions(ctx, req.body, reply));

  app.post("/tokenize", async (req) => {
    const body = requestObject(req.body);
    refuseUnsupported(body, TOKENIZE_KEYS);
    const model = chat.model(body.model);
    const tok = model.requireTokenizer();
    let ids: number[];
    if (body.messages !== undefined) {
      const messages = parseMessages(body);
      ctx.checkBytes(model, messages.reduce((n, m) => n + Buffer.byteLength(m.content ?? ""), 0));
      const text = renderChat(tok, messages, { tools: parseTools(body), addGenerationPrompt: body.add_generation_prompt !== false, extra: parseTemplateKwargs(body) });
      ids = await encode(model, text, body.add_special_tokens === true);
    } else if (typeof body.prompt === "string") {
      ids = await encode(model, body.prompt, body.add_special_tokens !== false);
    } else throw bad("prompt", "give 'prompt' (a string) or 'messages'");
    return { count: ids.length, max_model_len: model.config.maxPositions, tokens: ids, ...(body.return_token_strs === true ? { token_strs: ids.map((t) => tok.decode([t], { skipSpecialTokens: false })) } : {}) };
  });
  app.post("/detokenize", async (req) => {
    const body = requestObject(req.body);
    refuseUnsupported(body, new Set(["model", "tokens"]));
    const model = chat.model(body.model);
    const ids = optTokenIds(body, "tokens", model.config.vocabSize);
    if (!ids) throw bad("tokens", "'tokens' (a list of token ids) is required");
    return { prompt: model.requireTokenizer().decode(ids, { skipSpecialTokens: false }) };
  });

  // vLLM's runtime adapter routes: an adapter is merged into a copy of the base weights and served by name
  app.post("/v1/load_lora_adapter", async (req, reply) => {
    const body = (req.body ?? {}) as Record<string, unknown>;
    const name = body.lora_name;
    const path = body.lora_path;
    if (typeof name !== "string" || name === "") throw bad("lora_name", "'lora_name' is required");
    if (typeof path !== "string" || path === "") throw bad("lora_path", "'lora_path' is required (a PEFT adapter folder)");
    if (chat.models.has(name) || loading.has(name)) throw new RequestError(400, `The lora adapter '${name}' has already been loaded.`, { param: "lora_name" });
    loading.add(name);
    try {
      chat.addModel(mergedModel(opts.model, path, { name }));
    } finally {
      loading.delete(name);
    }
    return reply.type("text/plain; charset=utf-8").send(`Success: LoRA adapter '${name}' added successfully.`);
  });
  app.post("/v1/unload_lora_adapter", async (req, reply) => {
    const name = ((req.body ?? {}) as Record<string, unknown>).lora_name;
    if (typeof name !== "string" || name === "") throw bad("lora_name", "'lora_name' is required");
    if (name === chat.baseName) throw bad("lora_name", `'${name}' is the base model, not an adapter`);
    if (!chat.models.has(name)) throw new RequestError(404, `The lora adapter '${name}' cannot be found.`, { param: "lora_name", code: "model_not_found" });
    (await chat.removeModel(name)).dispose();
    return reply.type("text/plain; charset=utf-8").send(`Success: LoRA adapter '${name}' removed successfully.`);
  });

  await app.listen({ port: opts.port ?? 8000, host: opts.host ?? "127.0.0.1" });
  const addr = app.server.address() as AddressInfo;
  const host = addr.family === "IPv6" ? `[${addr.address}]` : addr.address;
  return {
    url: `http://${host}:${addr.port}`,
    engine: chat,
    close: async () => {
      // connections are closed at once (their generations are cancelled), then the engines stop
      await app.close();
      ctx.metrics.close();
      await chat.close();
      await pool.close();
      for (const m of chat.models.values()) if (m !== opts.model) m.dispose();
    },
  };
}
