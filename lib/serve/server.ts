/**
 * `t2s serve`: an OpenAI- and vLLM-compatible HTTP server on fastify (routing, body limits, graceful close).
 * Every served model (the base under its name, each LoRA adapter merged into a copy of the weights under
 * its own) has one generation engine that batches requests continuously: a request joins the running batch
 * at the next decode step, in arrival order within `maxBatch` rows. The engines run where the engine host
 * says (engine-host.ts): in a worker thread for a model folder (`load`, what `t2s serve` gives), or in this
 * thread for a model the caller built (`model`).
 */
import Fastify, { type FastifyReply, type FastifyRequest } from "fastify";
import type { AddressInfo } from "node:net";
import { ChatEngine, renderChat } from "../model/chat.js";
import type { CausalLM } from "../model/model.js";
import type { ServedModel } from "../model/served-model.js";
import { startEngineHost, type EngineHost, type EngineLoadSpec, type EngineThreadMode } from "./engine-host.js";
import { chatCompletions, type ServeContext } from "./chat-route.js";
import { completions } from "./completions.js";
import { asRequestError } from "./errors.js";
import { ServeMetrics } from "./metrics.js";
import { bad, optTokenIds, refuseUnsupported, RequestError } from "./params.js";
import { errorBody, parseMessages, parseTemplateKwargs, parseTools, requestObject } from "./protocol.js";
import { TokenizerPool } from "./tokenize-pool.js";
import { hasBearerKey, jsonBodiesOnly, requireApiKey, requireLocalHost } from "./access.js";
import { apiKeyOption, isLoopback, limitConnections, type ConnectionGuard, type ConnectionLimits } from "./http-guard.js";
import { DrainDeadline, SHUTDOWN_TIMEOUT_S } from "./shutdown.js";
import { adapterLoading, mergeAdapters, registerAdapterRoutes, runtimeLoraFromEnv, type ServerAdapterOptions } from "./adapters.js";
import { REQUEST_LIMITS, type RequestLimits } from "./limits.js";
import { setGuidedLimits, type GuidedLimits } from "../model/guided.js";
import { T2sError } from "../core/errors.js";

export interface ServerOptions {
  /** A model the caller built or loaded: its engine runs in this thread (give this or `load`). */
  model?: CausalLM;
  /** A model folder to load (what `t2s serve` gives): its weights and engine run where `engineThread` says. */
  load?: EngineLoadSpec;
  /** Where a loaded model's engine runs: "worker" (default: a thread of its own) or "main" (this thread). */
  engineThread?: EngineThreadMode;
  /** Adapters to serve: name -> PEFT folder (merged on start), or models already built (with `model` only). */
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
  /** Keep prompts' keys and values across requests (vLLM's --enable-prefix-caching; default true). */
  enablePrefixCaching?: boolean;
  /** Request bodies larger than this are refused (default 8 MiB). */
  maxBodyBytes?: number;
  /**
   * Every route but /health needs `Authorization: Bearer <key>`, and /health says only `{status}` without it
   * (default: VLLM_API_KEY, else none; an empty or blank key is a usage error).
   */
  apiKey?: string;
  /** Without a key, Host names answered besides loopback ones and the listen address ("*": any). */
  allowedHosts?: string[];
  /** Serve the runtime adapter routes (default: VLLM_ALLOW_RUNTIME_LORA_UPDATING). */
  allowRuntimeLora?: boolean;
  /** Adapters served at once at most (vLLM's --max-loras; default 8). */
  maxLoras?: number;
  /** Folders a runtime adapter must lie under (default: any folder holding adapter_config.json). */
  loraRoots?: string[];
  /** Caps on adapter files and whether another base is accepted, for start-up and runtime adapters alike. */
  adapterLoading?: ServerAdapterOptions;
  /** Open connections, and the time limits on headers, bodies and idle sockets (http-guard.ts). */
  connections?: ConnectionLimits;
  /** How long close() waits for in-flight requests before cutting them (default 30 s). */
  shutdownTimeoutMs?: number;
  /** Logprobs reported: the model's raw ones (vLLM's default) or the processed ones the token was drawn from. */
  logprobsMode?: "raw_logprobs" | "processed_logprobs";
  /** Where warnings go (default stderr). */
  warn?: (line: string) => void;
  /** Prompts and sequences one request may ask for (default REQUEST_LIMITS). */
  requestLimits?: Partial<RequestLimits>;
  /** Guided decoding's limits on schema size, nesting and compile time (default GUIDED_LIMITS). */
  guidedLimits?: Partial<GuidedLimits>;
}

export interface RunningServer {
  url: string;
  engine: ChatEngine;
  /** Where the engines run, what was loaded, and whether the engine thread is alive. */
  host: EngineHost;
  /**
   * Graceful stop: new requests get a 503 at once, in-flight ones may finish within the shutdown timeout
   * (`timeoutMs` overrides it), then the rest are cut with a final error event and `[DONE]`, and the
   * server closes.
   */
  close(timeoutMs?: number): Promise<void>;
  /** Requests being answered now. */
  inFlight(): number;
  /** What the connection limits did so far. */
  connections: ConnectionGuard;
}

const ROUTES = "POST /v1/chat/completions, POST /v1/completions, GET /v1/models[/{id}], POST /tokenize, POST /detokenize, POST /v1/load_lora_adapter, POST /v1/unload_lora_adapter, GET /metrics, GET /health";
const TOKENIZE_KEYS = new Set(["model", "prompt", "messages", "tools", "add_generation_prompt", "add_special_tokens", "return_token_strs", "chat_template_kwargs"]);

/** Starts the server and returns its URL (port 0 picks a free port) and a close function. */
export async function startServer(opts: ServerOptions): Promise<RunningServer> {
  const apiKey = opts.apiKey !== undefined ? apiKeyOption(opts.apiKey, "the API key") : apiKeyOption(process.env.VLLM_API_KEY || undefined, "VLLM_API_KEY");
  if (Array.isArray(opts.adapters) && !opts.model) throw new T2sError("usage", "adapters built in memory are served with a model built in memory (`model`), not a load spec");
  const host = await startEngineHost(opts);
  try {
    return await serveOn(host, apiKey, opts);
  } catch (e) {
    await host.close();
    throw e;
  }
}

async function serveOn(engineHost: EngineHost, apiKey: string | undefined, opts: ServerOptions): Promise<RunningServer> {
  const base = engineHost.base;
  const adapters = Array.isArray(opts.adapters) ? opts.adapters : await mergeAdapters(engineHost.merge, opts.adapters ?? {}, adapterLoading(opts));
  const baseTok = base.requireTokenizer();
  const pool = await TokenizerPool.start(baseTok, base.dir);
  const encode = (m: ServedModel, text: string, addSpecialTokens: boolean): Promise<number[]> => {
    if (m.tokenizer === baseTok) return pool.encode(text, { addSpecialTokens, maxPositions: m.config.maxPositions });
    try {
      pool.checkBytes(Buffer.byteLength(text), m.config.maxPositions);
      return Promise.resolve(m.requireTokenizer().encode(text, { addSpecialTokens }));
    } catch (e) {
      return Promise.reject(e);
    }
  };
  const chat = new ChatEngine(base, adapters, { maxBatch: opts.maxBatch, maxPrefillTokens: opts.maxPrefillTokens, enablePrefixCaching: opts.enablePrefixCaching, tokenize: encode, engines: engineHost.engines });
  // adapters share their base's tokenizer, and guided decoding's limits are kept per tokenizer
  for (const m of [base, ...adapters]) setGuidedLimits(m.requireTokenizer(), opts.guidedLimits ?? {});
  const limits: RequestLimits = { ...REQUEST_LIMITS, ...opts.requestLimits };
  const ctx: ServeContext = { chat, metrics: new ServeMetrics(chat), encode, checkBytes: (m, bytes) => pool.checkBytes(bytes, m.config.maxPositions), logprobsMode: opts.logprobsMode === "processed_logprobs" ? "processed" : "raw", limits };
  const created = Math.floor(Date.now() / 1000);
  const app = Fastify({
    bodyLimit: opts.maxBodyBytes ?? 8 * 1024 * 1024,
    forceCloseConnections: true,
    routerOptions: { ignoreTrailingSlash: true },
    logger: false,
  });
  const conns = limitConnections(app.server, opts.connections);
  const warn = opts.warn ?? ((line: string) => process.stderr.write(`${line}\n`));
  const host = opts.host ?? "127.0.0.1";
  // without a key, the Host check comes first: a request a web page made through DNS rebinding goes no further
  if (apiKey) requireApiKey(app, apiKey);
  else requireLocalHost(app, host, opts.allowedHosts);
  if (!apiKey && !isLoopback(host)) warn(`warning: t2s serve listens on ${host} without an API key: anyone who can reach it can generate${opts.allowRuntimeLora ?? runtimeLoraFromEnv() ? " and load adapters" : ""}; give --api-key (or VLLM_API_KEY); without one, only requests addressed to localhost, 127.0.0.1, [::1] or ${host} are answered (--allowed-host adds names)`);
  jsonBodiesOnly(app);
  // graceful shutdown: once draining, every new request is a 503; in-flight ones are counted
  let draining = false;
  let inFlight = 0;
  app.addHook("onRequest", async (req, reply) => {
    if (draining) {
      reply.header("connection", "close");
      return reply.code(503).send(errorBody(new RequestError(503, "the server is shutting down", { code: "shutting_down" })));
    }
    inFlight++;
    reply.raw.once("close", () => inFlight--);
  });
  app.setErrorHandler((e, _req, reply) => {
    const err = asRequestError(e);
    void reply.code(err.status).send(errorBody(err));
  });
  app.setNotFoundHandler((req, reply) => {
    void reply.code(404).send(errorBody(new RequestError(404, `no route ${req.method} ${req.url.split("?")[0]}; this server has ${ROUTES}`)));
  });

  const modelCard = (m: ServedModel) => ({ id: m.name, object: "model", created, owned_by: "t2s-lab", root: m.name, parent: m.name === chat.baseName ? null : chat.baseName, max_model_len: m.config.maxPositions });
  // with a key, what is served (adapter names included) and the load are told to key holders only
  // answered from this thread's state (the engine thread's last snapshot), never waiting for a step; an
  // engine thread that died makes it a 503 saying so
  app.get("/health", async (req, reply) => {
    const failed = engineHost.failure();
    if (failed) void reply.code(503);
    const status = failed ? "engine_failed" : "ok";
    if (apiKey && !hasBearerKey(req, apiKey)) return { status };
    return { status, ...(failed ? { error: asRequestError(failed).message } : {}), model: chat.baseName, backend: engineHost.backend, engine_thread: engineHost.mode, models: [...chat.models.keys()], ...chat.load() };
  });
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

  if (opts.allowRuntimeLora ?? runtimeLoraFromEnv()) registerAdapterRoutes(app, chat, engineHost.merge, { maxAdapters: opts.maxLoras, roots: opts.loraRoots, ...adapterLoading(opts) });

  await app.listen({ port: opts.port ?? 8000, host });
  const addr = app.server.address() as AddressInfo;
  const shown = addr.family === "IPv6" ? `[${addr.address}]` : addr.address;
  let closing: Promise<void> | null = null;
  let drain: DrainDeadline | null = null;
  const close = async () => {
    draining = true;
    await drain!.until(() => inFlight === 0);
    // what is still running is cut: each stream gets its error event and [DONE], each plain request a 503
    await chat.close();
    await new DrainDeadline(2000).until(() => inFlight === 0);
    await app.close();
    ctx.metrics.close();
    await pool.close();
    for (const m of chat.models.values()) if (m !== base) m.dispose();
    await engineHost.close();
  };
  return {
    url: `http://${shown}:${addr.port}`,
    engine: chat,
    host: engineHost,
    // a second call (a second signal) can only shorten the wait: close(0) cuts at once
    close: (timeoutMs = opts.shutdownTimeoutMs ?? SHUTDOWN_TIMEOUT_S * 1000) => {
      if (drain) drain.cut(timeoutMs);
      else drain = new DrainDeadline(timeoutMs);
      return (closing ??= close());
    },
    inFlight: () => inFlight,
    connections: conns,
  };
}
