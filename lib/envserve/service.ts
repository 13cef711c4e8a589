/**
 * The kit's environment as a service for outside trainers: grading, the read-only SQL tool and the prompt
 * of a task, each answered by the same code the kit itself uses (lib/verifier/line-grader gradeRequest, the
 * one grading path of `t2s grade --jsonl`; lib/runs/env defaultEnv for prompts and tool queries;
 * lib/episode answerCall for the tool turn's text). Tool queries run on their own executor, so runaway tool
 * queries cannot hold grading back. This file is transport-free; lib/envserve/server.ts puts it on HTTP.
 */
import { setMaxListeners } from "node:events";
import { statSync } from "node:fs";
import { basename, extname } from "node:path";
import { markExact } from "../db/exact.js";
import type { Executor } from "../db/types.js";
import { T2sError, isT2sError } from "../core/errors.js";
import { answerCall } from "../episode/loop.js";
import type { PromptConfig, ToolProtocol } from "../episode/prompt.js";
import { SQL_TOOL_NAME, sqlToolSpec, type RawCall } from "../episode/tools.js";
import type { ToolOutputOptions } from "../episode/truncate.js";
import type { ChatMessage, ToolSpec } from "../policy/types.js";
import { defaultEnv } from "../runs/env.js";
import type { Task } from "../tasks/types.js";
import { GoldCache } from "../verifier/goldcache.js";
import { gradeRequest, type LineOptions } from "../verifier/line-grader.js";
import { gradeAnswer, parseGradeRequest, REQUEST_DEFAULTS, type RequestDefaults } from "../verifier/request.js";
import type { GradeResult } from "../verifier/types.js";
import { DatabaseRoots } from "./access.js";
import { BadRequest, refuseUnknownFields } from "./errors.js";
import { FairLimiter } from "./fair-limiter.js";
import { MAX_GRADE_ITEMS } from "./limits.js";
import { EnvMetrics } from "./metrics.js";
import { QUERY_TIMEOUT_MS, TOOL_ROWS } from "../core/defaults.js";

export { BadRequest } from "./errors.js";

export { MAX_GRADE_ITEMS } from "./limits.js";

/** Who a grade request comes from and whether it is still wanted. */
export interface GradeContext {
  /** Aborts when the client went away: its waiting items leave the queue and its running queries are stopped. */
  signal?: AbortSignal;
  /** Tells clients apart for the fair share of grading (the server passes the connection); default: a turn of its own. */
  client?: unknown;
}

export interface EnvServiceOptions {
  /** Runs the graded queries (and the gold). */
  executor: Executor;
  /** Runs tool queries (default `executor`; `t2s env serve` gives them a pool of their own). */
  toolExecutor?: Executor;
  /** Tasks that requests may name by id. */
  tasks: Task[];
  /** Folders whose databases requests may name besides the tasks' own (`--db-root`). */
  dbRoots?: string[];
  /** Defaults of a grade item (as `t2s grade`'s flags set them). */
  defaults?: RequestDefaults;
  /** The `t2s grade` flags that are not per-line fields: timeout, row cap, neighbor seed, suite folder. */
  line?: Partial<Omit<LineOptions, "goldCache">>;
  /** Grades in flight at once (default 8 per SQL worker, the window of `t2s grade --jsonl`), shared among clients in turn. */
  concurrency?: number;
  /** Items one grade request may carry (default MAX_GRADE_ITEMS). */
  maxItems?: number;
  /** Prompt the service renders: episode style, tool protocol, tool-call budget. */
  prompt?: Omit<PromptConfig, "toolRows">;
  /** How tool results are shown (rows, characters, truncation mode); default as `t2s benchmark`. */
  toolOutput?: ToolOutputOptions;
  /** Time limit of a tool query in ms (default QUERY_TIMEOUT_MS). */
  toolTimeoutMs?: number;
}

/**
 * One answered grade item: the `t2s grade --jsonl` answer plus the extracted SQL, or an error with its code.
 * `infra_error` (and `worker_start_failed`, `pool_closed`) is a failure of the service, not a verdict on the
 * item: the same item sent again may be graded; a trainer should retry it or leave it out, never score it.
 */
export type GradeItemAnswer = (ReturnType<typeof gradeAnswer> & { sql: string | null }) | { error: string; code: string };

/** Error codes of items the service failed to grade through no fault of the item (see GradeItemAnswer). */
export const INFRA_ERROR_CODES: readonly string[] = ["infra_error", "worker_start_failed", "pool_closed"];

/** What the tool endpoint answers: the tool turn's text exactly as an episode shows it. */
export interface ToolAnswer {
  content: string;
  /** The call counts as invalid in an episode (unusable call, or an unsafe query). */
  invalid: boolean;
  /** The query, when the sandbox refused it as unsafe (under the tool-rl preset this ends an episode). */
  unsafe?: string;
}

/** The fields of a `t2s grade --jsonl` line (lib/verifier/request.ts). */
const LINE_FIELDS = ["db", "gold", "pred", "reply", "preset", "order", "round", "neighbors", "numeric_text", "finish_reason", "invalid_tool_calls", "dialect", "distinct", "text", "db_id"];
/** A grade item: a line's fields, or a task by id, and the unsafe tool query that ended the episode. */
const ITEM_FIELDS = [...LINE_FIELDS, "task_id", "unsafe_tool_query"];
const TOOL_FIELDS = ["task_id", "db", "query", "name", "arguments"];
const PROMPT_FIELDS = ["task_id", "db", "question", "evidence", "style", "protocol"];

function isObject(v: unknown): v is Record<string, unknown> {
  return v !== null && typeof v === "object" && !Array.isArray(v);
}

/** Batch grading, the tool and prompts over the executors and one gold cache. */
export class EnvService {
  readonly tasks = new Map<string, Task>();
  readonly goldCache = new GoldCache();
  readonly metrics = new EnvMetrics();
  readonly prompt: PromptConfig;
  private readonly limiter: FairLimiter;
  private readonly maxItems: number;
  private readonly env;
  private readonly defaults: RequestDefaults;
  private readonly line: LineOptions;
  private readonly roots: DatabaseRoots;
  private readonly toolExecutor: Executor;
  /** Grade, tool and prompt requests being answered. */
  private inflight = 0;
  /** Set by drain(): new requests are refused with 503. */
  private draining = false;
  private readonly whenIdle: Array<() => void> = [];

  constructor(private readonly opts: EnvServiceOptions) {
    for (const t of opts.tasks) {
      if (this.tasks.has(t.id)) throw new T2sError("duplicate_task", `task id ${t.id} appears twice in the task files; ids must be unique`);
      this.tasks.set(t.id, t);
    }
    const toolRows = opts.toolOutput?.maxRows ?? TOOL_ROWS;
    this.prompt = { style: "single", ...opts.prompt, toolRows };
    this.defaults = opts.defaults ?? REQUEST_DEFAULTS;
    this.line = { neighborSeed: 0, timeoutMs: QUERY_TIMEOUT_MS, ...opts.line, goldCache: this.goldCache };
    this.roots = new DatabaseRoots(opts.tasks.map((t) => t.db_path), opts.dbRoots ?? []);
    const poolSize = (opts.executor as { size?: number }).size ?? 1;
    this.limiter = new FairLimiter(opts.concurrency ?? Math.max(8, poolSize * 8));
    this.maxItems = opts.maxItems ?? MAX_GRADE_ITEMS;
    this.toolExecutor = opts.toolExecutor ?? opts.executor;
    this.env = defaultEnv({ executor: this.toolExecutor, prompt: this.prompt, toolRows, toolTimeoutMs: opts.toolTimeoutMs });
  }

  /** Returns the task a request names by "task_id", or throws BadRequest (404 for an unknown id). */
  private task(id: unknown): Task {
    if (typeof id !== "string" || id === "") throw new BadRequest(`"task_id" must be a non-empty string`);
    const t = this.tasks.get(id);
    if (!t) throw new BadRequest(`unknown task_id ${JSON.stringify(id)} (the service knows ${this.tasks.size} tasks; start it with --tasks FILE)`, 404);
    return t;
  }

  /** Runs one request's work, counted for drain(); refused with 503 once the service is draining. */
  private async track<T>(work: () => Promise<T>): Promise<T> {
    if (this.draining) throw new BadRequest("the service is shutting down and takes no new work; send it to another instance, or retry once this one is back", 503);
    this.inflight++;
    try {
      return await work();
    } finally {
      this.inflight--;
      // after the caller has used the answer (the server writes it in the continuation of this promise)
      if (this.inflight === 0 && this.whenIdle.length > 0) setImmediate(() => this.wakeIfIdle());
    }
  }

  private wakeIfIdle(): void {
    if (this.inflight === 0) for (const resolve of this.whenIdle.splice(0)) resolve();
  }

  /**
   * Stops taking new grade, tool and prompt requests (each is refused with 503 from now on) and resolves once
   * every one in flight has been answered (a turn of the event loop after the last, so its caller has written
   * the answer): what a server calls on SIGTERM before it closes its connections.
   */
  drain(): Promise<void> {
    this.draining = true;
    if (this.inflight === 0) return Promise.resolve();
    return new Promise((resolve) => this.whenIdle.push(resolve));
  }

  /** Grade, tool and prompt requests in flight now. */
  get inFlight(): number {
    return this.inflight;
  }

  /**
   * The database a request names by path: the real path the root check resolved (a 403 outside the roots),
   * marked to be opened exactly that way (lib/db/exact.ts), so that no link swapped in after the check can
   * lead a read elsewhere. Anything there that is not a regular file (a FIFO, a device, a folder) is refused
   * before anything opens it.
   */
  private database(path: string): string {
    const real = this.roots.check(path);
    let st;
    try {
      st = statSync(real);
    } catch {
      st = undefined; // missing: graded as no_database, as any missing database
    }
    if (st && !st.isFile()) throw new BadRequest(`database ${path} is not a regular file`);
    markExact(real);
    return real;
  }

  /**
   * Grades a batch: `{"items": [...]}` (or a bare array); one bad item answers `{error}` and the rest go on.
   * Items wait for a place in turn with other clients' (ctx.client); when ctx.signal aborts, the waiting ones
   * leave and the running ones are stopped, each answering `{"error", "code": "cancelled"}`.
   */
  gradeBatch(body: unknown, ctx: GradeContext = {}): Promise<GradeItemAnswer[]> {
    return this.track(() => this.grades(body, ctx));
  }

  private async grades(body: unknown, ctx: GradeContext): Promise<GradeItemAnswer[]> {
    if (isObject(body)) refuseUnknownFields(body, ["items"], "a grade request");
    const items = Array.isArray(body) ? body : isObject(body) ? body.items : undefined;
    if (!Array.isArray(items)) throw new BadRequest(`the body must be {"items": [...]} (or a JSON array of items)`);
    if (items.length > this.maxItems) throw new BadRequest(`at most ${this.maxItems} items per request (--max-items), got ${items.length}; split the batch`);
    const client = ctx.client ?? {};
    // every item, its queries and the cache runs it waits on listen to the one signal of the request
    if (ctx.signal) setMaxListeners(0, ctx.signal);
    return Promise.all(items.map((item, i) => this.limiter.run(client, () => this.gradeItem(item, i, ctx.signal), ctx.signal).catch((e: unknown) => this.failed(`item ${i}`, e))));
  }

  private async gradeItem(item: unknown, index: number, signal: AbortSignal | undefined): Promise<GradeItemAnswer> {
    try {
      const r = await this.gradeOne(item, signal);
      this.metrics.graded(r.outcome);
      return { ...gradeAnswer(r), sql: r.sql };
    } catch (e) {
      return this.failed(`item ${index}`, e);
    }
  }

  /** The answer of an item that could not be graded, counted by whose failure it is. */
  private failed(where: string, e: unknown): GradeItemAnswer {
    const code = isT2sError(e) ? e.code : "internal";
    this.metrics.gradeError(code === "cancelled" ? "cancelled" : INFRA_ERROR_CODES.includes(code) ? "infra_error" : "error");
    if (e instanceof BadRequest) return { error: `${where}: ${e.message}`, code };
    if (isT2sError(e)) return { error: `${where}: ${e.code}: ${e.message}`, code };
    return { error: `${where}: ${e instanceof Error ? e.message : String(e)}`, code };
  }

  /**
   * One item, graded by the function that grades a `t2s grade --jsonl` line: either such a line ({"db",
   * "gold", "pred", ...}: same fields, same defaults, so the two answer alike), or {"task_id", "pred", ...}:
   * the line the task stands for (its database, gold, db_id, dialect and grading overrides), under the
   * fields the item sets itself. "unsafe_tool_query" is the tool query that ended the episode as unsafe.
   */
  private async gradeOne(item: unknown, signal: AbortSignal | undefined): Promise<GradeResult> {
    if (!isObject(item)) throw new BadRequest("an item must be a JSON object");
    refuseUnknownFields(item, ITEM_FIELDS, "a grade item");
    const { task_id, unsafe_tool_query, ...fields } = item;
    if (unsafe_tool_query !== undefined && typeof unsafe_tool_query !== "string") throw new BadRequest(`field "unsafe_tool_query" must be a string`);
    let task: Task | undefined;
    let line: Record<string, unknown> = fields;
    if (task_id !== undefined) {
      if (fields.db !== undefined || fields.gold !== undefined) throw new BadRequest(`give "task_id", or "db" and "gold", not both`);
      task = this.task(task_id);
      const g = task.grading ?? {};
      const fromTask = { db: task.db_path, gold: task.gold_sql, db_id: task.db_id, dialect: task.dialect, order: g.order, round: g.round, text: g.text };
      line = { ...Object.fromEntries(Object.entries(fromTask).filter(([, v]) => v !== undefined)), ...fields };
    } else if (typeof fields.db === "string" && fields.db.trim() !== "") {
      line = { ...fields, db: this.database(fields.db) };
    }
    const req = parseGradeRequest(JSON.stringify(line), this.defaults);
    if ("error" in req) throw new BadRequest(req.error);
    return gradeRequest(this.opts.executor, req, this.line, { ...(task ? { task } : {}), ...(unsafe_tool_query !== undefined ? { unsafeToolQuery: unsafe_tool_query as string } : {}), ...(signal ? { signal } : {}) });
  }

  /** Resolves the database of a tool or prompt request: a task's, or an explicit "db" path. */
  private target(body: Record<string, unknown>): Task {
    if (body.task_id !== undefined) return this.task(body.task_id);
    if (typeof body.db !== "string" || body.db.trim() === "") throw new BadRequest(`give "task_id", or "db" (a SQLite file path)`);
    const path = this.database(body.db);
    const stem = basename(path, extname(path));
    return { id: "", db_id: stem, db_path: path, question: "", gold_sql: "", difficulty: "", archetype: "", style: "", split: "train", source: "request" };
  }

  /**
   * Answers one tool call exactly as an episode's tool turn: {"task_id" | "db", "query"} or, to see the
   * error text for a malformed call, {"task_id" | "db", "name", "arguments"} as the model wrote them.
   */
  tool(body: unknown): Promise<ToolAnswer> {
    return this.track(() => this.toolCall(body));
  }

  private async toolCall(body: unknown): Promise<ToolAnswer> {
    if (!isObject(body)) throw new BadRequest("the body must be a JSON object");
    refuseUnknownFields(body, TOOL_FIELDS, "a tool request");
    const task = this.target(body);
    let call: RawCall;
    if (body.query !== undefined) {
      if (typeof body.query !== "string") throw new BadRequest(`"query" must be a string`);
      call = { id: "call_0", name: SQL_TOOL_NAME, arguments: JSON.stringify({ query: body.query }), source: "native" };
    } else if (body.name !== undefined || body.arguments !== undefined) {
      const args = body.arguments;
      call = { id: "call_0", name: typeof body.name === "string" ? body.name : "", arguments: typeof args === "string" ? args : JSON.stringify(args ?? {}), source: "native" };
    } else throw new BadRequest(`give "query" (the SQL to run), or "name" and "arguments" of a tool call`);
    const answer = await answerCall(call, (q) => this.env.runTool(task, q), this.opts.toolOutput);
    this.metrics.toolCall(answer.invalid);
    return answer;
  }

  /**
   * The opening messages of a task's episode and the tools sent with it, rendered as the kit renders them:
   * {"task_id"} or {"db", "question", "evidence"?}; "style" and "protocol" override the service's prompt.
   */
  promptFor(body: unknown): Promise<{ messages: ChatMessage[]; tools: ToolSpec[]; style: string; protocol: ToolProtocol | null }> {
    return this.track(() => this.prompting(body));
  }

  private async prompting(body: unknown): Promise<{ messages: ChatMessage[]; tools: ToolSpec[]; style: string; protocol: ToolProtocol | null }> {
    if (!isObject(body)) throw new BadRequest("the body must be a JSON object");
    refuseUnknownFields(body, PROMPT_FIELDS, "a prompt request");
    const task = { ...this.target(body) };
    if (body.task_id === undefined) {
      if (typeof body.question !== "string" || body.question.trim() === "") throw new BadRequest(`"question" must be a non-empty string when no task_id is given`);
      task.question = body.question;
      if (body.evidence !== undefined && typeof body.evidence !== "string") throw new BadRequest(`"evidence" must be a string`);
      if (typeof body.evidence === "string") task.evidence = body.evidence;
    }
    if (body.style !== undefined && body.style !== "single" && body.style !== "tool") throw new BadRequest(`"style" must be "single" or "tool"`);
    if (body.protocol !== undefined && body.protocol !== "native" && body.protocol !== "hermes") throw new BadRequest(`"protocol" must be "native" or "hermes"`);
    const cfg: PromptConfig = { ...this.prompt, ...(body.style ? { style: body.style as PromptConfig["style"] } : {}), ...(body.protocol ? { protocol: body.protocol as ToolProtocol } : {}) };
    const env = cfg.style === this.prompt.style && cfg.protocol === this.prompt.protocol ? this.env : defaultEnv({ executor: this.toolExecutor, prompt: cfg, toolRows: cfg.toolRows });
    const messages = await env.opening(task);
    const tool = cfg.style === "tool";
    const protocol = tool ? cfg.protocol ?? "native" : null;
    return { messages, tools: tool && protocol === "native" ? [sqlToolSpec()] : [], style: cfg.style, protocol };
  }

  /** Facts for /health. */
  health(): Record<string, unknown> {
    const size = (e: Executor) => (e as { size?: number }).size ?? 1;
    return { status: this.draining ? "draining" : "ok", tasks: this.tasks.size, workers: size(this.opts.executor), tool_workers: this.toolExecutor === this.opts.executor ? 0 : size(this.toolExecutor), style: this.prompt.style, protocol: this.prompt.style === "tool" ? this.prompt.protocol ?? "native" : null };
  }
}
