/**
 * The kit's environment as a service for outside trainers: grading, the read-only SQL tool and the prompt
 * of a task, each answered by the same code an episode of the kit uses (lib/verifier grade(), lib/runs/env
 * defaultEnv for prompts and tool queries, lib/episode answerCall for the tool turn's text). This file is
 * transport-free; lib/envserve/server.ts puts it on HTTP.
 */
import { basename, extname, resolve } from "node:path";
import type { Executor } from "../db/types.js";
import { T2sError, isT2sError } from "../core/errors.js";
import { answerCall } from "../episode/loop.js";
import type { PromptConfig, ToolProtocol } from "../episode/prompt.js";
import { SQL_TOOL_NAME, sqlToolSpec, type RawCall } from "../episode/tools.js";
import type { ToolOutputOptions } from "../episode/truncate.js";
import { Limiter } from "../policy/limiter.js";
import type { ChatMessage, ToolSpec } from "../policy/types.js";
import { defaultEnv } from "../runs/env.js";
import type { Task } from "../tasks/types.js";
import { GoldCache } from "../verifier/goldcache.js";
import { grade, type GradeOptions } from "../verifier/grade.js";
import { gradeAnswer, parseGradeRequest, REQUEST_DEFAULTS, type RequestDefaults } from "../verifier/request.js";
import type { GradeResult } from "../verifier/types.js";
import { EnvMetrics } from "./metrics.js";
import { QUERY_TIMEOUT_MS, RESULT_ROWS, TOOL_ROWS } from "../core/defaults.js";

export interface EnvServiceOptions {
  executor: Executor;
  /** Tasks that requests may name by id. */
  tasks: Task[];
  /** Defaults of a grade item (as `t2s grade`'s flags set them). */
  defaults?: RequestDefaults;
  /** Per-query time limit in ms (default QUERY_TIMEOUT_MS, as `t2s grade`). */
  timeoutMs?: number;
  /** Row cap of graded queries (default 200, as `t2s grade`). */
  maxRows?: number;
  /** Seed of neighbor copies (default 0). */
  neighborSeed?: number;
  /** Grades in flight at once (default 8 per SQL worker, the window of `t2s grade --jsonl`). */
  concurrency?: number;
  /** Prompt the service renders: episode style, tool protocol, tool-call budget. */
  prompt?: Omit<PromptConfig, "toolRows">;
  /** How tool results are shown (rows, characters, truncation mode); default as `t2s benchmark`. */
  toolOutput?: ToolOutputOptions;
  /** Time limit of a tool query in ms (default QUERY_TIMEOUT_MS). */
  toolTimeoutMs?: number;
}

/** One answered grade item: the `t2s grade --jsonl` answer plus the extracted SQL, or an error. */
export type GradeItemAnswer = (ReturnType<typeof gradeAnswer> & { sql: string | null }) | { error: string };

/** What the tool endpoint answers: the tool turn's text exactly as an episode shows it. */
export interface ToolAnswer {
  content: string;
  /** The call counts as invalid in an episode (unusable call, or an unsafe query). */
  invalid: boolean;
}

/** A bad request body: the HTTP layer answers it with 400 and this message. */
export class BadRequest extends T2sError {
  constructor(message: string, readonly status = 400) {
    super("bad_request", message);
  }
}

function isObject(v: unknown): v is Record<string, unknown> {
  return v !== null && typeof v === "object" && !Array.isArray(v);
}

/** Batch grading, the tool and prompts over one executor and one gold cache. */
export class EnvService {
  readonly tasks = new Map<string, Task>();
  readonly goldCache = new GoldCache();
  readonly metrics = new EnvMetrics();
  readonly prompt: PromptConfig;
  private readonly limiter: Limiter;
  private readonly env;
  private readonly defaults: RequestDefaults;

  constructor(private readonly opts: EnvServiceOptions) {
    for (const t of opts.tasks) {
      if (this.tasks.has(t.id)) throw new T2sError("duplicate_task", `task id ${t.id} appears twice in the task files; ids must be unique`);
      this.tasks.set(t.id, t);
    }
    const toolRows = opts.toolOutput?.maxRows ?? TOOL_ROWS;
    this.prompt = { style: "single", ...opts.prompt, toolRows };
    this.defaults = opts.defaults ?? REQUEST_DEFAULTS;
    const poolSize = (opts.executor as { size?: number }).size ?? 1;
    this.limiter = new Limiter(opts.concurrency ?? Math.max(8, poolSize * 8));
    this.env = defaultEnv({ executor: opts.executor, prompt: this.prompt, toolRows, toolTimeoutMs: opts.toolTimeoutMs });
  }

  /** Returns the task a request names by "task_id", or throws BadRequest (404 for an unknown id). */
  private task(id: unknown): Task {
    if (typeof id !== "string" || id === "") throw new BadRequest(`"task_id" must be a non-empty string`);
    const t = this.tasks.get(id);
    if (!t) throw new BadRequest(`unknown task_id ${JSON.stringify(id)} (the service knows ${this.tasks.size} tasks; start it with --tasks FILE)`, 404);
    return t;
  }

  /** Grades a batch: `{"items": [...]}` (or a bare array); one bad item answers `{error}` and the rest go on. */
  async gradeBatch(body: unknown): Promise<GradeItemAnswer[]> {
    const items = Array.isArray(body) ? body : isObject(body) ? body.items : undefined;
    if (!Array.isArray(items)) throw new BadRequest(`the body must be {"items": [...]} (or a JSON array of items)`);
    if (items.length > 10_000) throw new BadRequest(`at most 10000 items per request, got ${items.length}; split the batch`);
    return Promise.all(items.map((item, i) => this.limiter.run(() => this.gradeItem(item, i))));
  }

  private async gradeItem(item: unknown, index: number): Promise<GradeItemAnswer> {
    const where = `item ${index}`;
    try {
      const r = await this.gradeOne(item);
      this.metrics.graded(r.outcome);
      return { ...gradeAnswer(r), sql: r.sql };
    } catch (e) {
      this.metrics.gradeError();
      if (e instanceof BadRequest) return { error: `${where}: ${e.message}` };
      if (isT2sError(e)) return { error: `${where}: ${e.code}: ${e.message}` };
      return { error: `${where}: ${e instanceof Error ? e.message : String(e)}` };
    }
  }

  /**
   * One item: either {"db", "gold", "pred", ...} exactly as a `t2s grade --jsonl` line (same fields, same
   * defaults, so the two answer alike), or {"task_id", "pred", ...}: the task's database and gold, its
   * grading overrides, and only the comparison fields the item sets itself.
   */
  private async gradeOne(item: unknown): Promise<GradeResult> {
    if (!isObject(item)) throw new BadRequest("an item must be a JSON object");
    const byTask = item.task_id !== undefined;
    const task = byTask ? this.task(item.task_id) : undefined;
    const line = task ? { ...item, db: task.db_path, gold: task.gold_sql } : item;
    const req = parseGradeRequest(JSON.stringify(line), this.defaults);
    if ("error" in req) throw new BadRequest(req.error);
    const explicit = (k: string) => !task || item[k] !== undefined;
    const gopts: GradeOptions = {
      executor: this.opts.executor,
      preset: req.preset,
      isReply: req.reply,
      finishReason: req.finishReason,
      invalidToolCalls: req.invalidToolCalls,
      neighbors: req.neighbors,
      neighborSeed: this.opts.neighborSeed ?? 0,
      timeoutMs: this.opts.timeoutMs ?? QUERY_TIMEOUT_MS,
      maxRows: this.opts.maxRows ?? RESULT_ROWS,
      goldCache: this.goldCache,
      compare: {
        order: explicit("order") ? req.order : undefined,
        round: explicit("round") ? req.round : undefined,
        numericText: explicit("numeric_text") ? req.numericText : undefined,
      },
    };
    return grade(task ?? { db_path: req.db, gold_sql: req.gold }, req.pred, gopts);
  }

  /** Resolves the database of a tool or prompt request: a task's, or an explicit "db" path. */
  private target(body: Record<string, unknown>): Task {
    if (body.task_id !== undefined) return this.task(body.task_id);
    if (typeof body.db !== "string" || body.db.trim() === "") throw new BadRequest(`give "task_id", or "db" (a SQLite file path)`);
    const path = resolve(body.db);
    const stem = basename(path, extname(path));
    return { id: "", db_id: stem, db_path: path, question: "", gold_sql: "", difficulty: "", archetype: "", style: "", split: "train", source: "request" };
  }

  /**
   * Answers one tool call exactly as an episode's tool turn: {"task_id" | "db", "query"} or, to see the
   * error text for a malformed call, {"task_id" | "db", "name", "arguments"} as the model wrote them.
   */
  async tool(body: unknown): Promise<ToolAnswer> {
    if (!isObject(body)) throw new BadRequest("the body must be a JSON object");
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
  async promptFor(body: unknown): Promise<{ messages: ChatMessage[]; tools: ToolSpec[]; style: string; protocol: ToolProtocol | null }> {
    if (!isObject(body)) throw new BadRequest("the body must be a JSON object");
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
    const env = cfg.style === this.prompt.style && cfg.protocol === this.prompt.protocol ? this.env : defaultEnv({ executor: this.opts.executor, prompt: cfg, toolRows: cfg.toolRows });
    const messages = await env.opening(task);
    const tool = cfg.style === "tool";
    const protocol = tool ? cfg.protocol ?? "native" : null;
    return { messages, tools: tool && protocol === "native" ? [sqlToolSpec()] : [], style: cfg.style, protocol };
  }

  /** Facts for /health. */
  health(): Record<string, unknown> {
    return { status: "ok", tasks: this.tasks.size, workers: (this.opts.executor as { size?: number }).size ?? 1, style: this.prompt.style, protocol: this.prompt.style === "tool" ? this.prompt.protocol ?? "native" : null };
  }
}
