/**
 * Tool-use training data for the kit's own model: for each train-only task, an episode in tool style in
 * which the assistant first runs one or two probing queries (probes.ts: the values of a filter column, a
 * date range, a join preview, a row count) and/or its draft answer, sees the sandbox's real output, then
 * commits the gold query. Each transcript is a real episode (lib/episode/loop.ts) played by a scripted
 * policy against the live database, so every tool result is byte for byte what an episode shows, and it
 * is graded: a transcript whose committed query is not correct is dropped. Both tool-call formats are
 * written (native `tool_calls` through the chat template, and hermes text), plus a share of single-style
 * episodes so the model keeps that format. A share of those single-style episodes can open with padding
 * (lib/episode/padding.ts: earlier tool turns that cannot help) up to a drawn length, so the model learns to
 * answer the question deep in its context, past turns it should ignore.
 */
import { QUERY_TIMEOUT_MS } from "../core/defaults.js";
import { tableColumns } from "../db/schema.js";
import type { ExecOutcome, Executor } from "../db/types.js";
import { T2sError } from "../core/errors.js";
import { runEpisode } from "../episode/loop.js";
import { padOpening } from "../episode/padding.js";
import type { EpisodeStyle, ToolProtocol } from "../episode/prompt.js";
import { SQL_TOOL_NAME, sqlToolSpec } from "../episode/tools.js";
import { toolCallText } from "../model/toolcalls.js";
import { scriptedPolicy, type ScriptedReply } from "../policy/scripted.js";
import type { ChatMessage, ToolSpec } from "../policy/types.js";
import { SeededRandom } from "../core/random.js";
import { defaultEnv } from "../runs/env.js";
import { sampleSeed } from "../runs/plan.js";
import type { Task } from "../tasks/types.js";
import { probesFor, type Probe } from "./probes.js";

/** What a transcript's assistant does before committing. */
export type ToolPlan = "direct" | "probe" | "probe_draft" | "draft" | "two_probes";

/** The share of each plan among tool-style transcripts (they sum to 1). */
export const PLAN_SHARES: ReadonlyArray<[ToolPlan, number]> = [
  ["probe", 0.35],
  ["probe_draft", 0.3],
  ["two_probes", 0.2],
  ["draft", 0.15],
];

export interface ToolDataOptions {
  executor: Executor;
  /** Seed of every choice (plan, probe, protocol, style); each task draws from its own stream. */
  seed: number;
  /** Share of single-style transcripts (default 0.2). */
  singleShare?: number;
  /** Share of hermes-text transcripts among the tool-style ones (default 0.5). */
  hermesShare?: number;
  /** Tool calls the prompt allows (default 5, the episode default). */
  maxToolCalls?: number;
  /** Padded single-style episodes (default none): see ToolDataPadding. */
  padding?: ToolDataPadding;
  onProgress?: (done: number, total: number) => void;
}

/**
 * Single-style episodes whose opening is padded: a `share` of them gets padding turns up to a length drawn
 * uniformly between the bare prompt and `maxTokens` prompt tokens, counted by `countTokens` (the model's own
 * chat template and tokenizer).
 */
export interface ToolDataPadding {
  share: number;
  maxTokens: number;
  countTokens: (messages: ChatMessage[]) => Promise<number>;
}

export interface Transcript {
  task_id: string;
  style: EpisodeStyle;
  protocol: ToolProtocol | null;
  plan: ToolPlan;
  /** Kinds of the probing queries run, in order ("draft" for the answer run as a probe). */
  probes: string[];
  /** Padding turns before the question's answer (single style with ToolDataOptions.padding), else absent. */
  padding_calls?: number;
  /** Index of the first trained message when the opening is padded: the padding calls are context, never trained. */
  train_from?: number;
  messages: ChatMessage[];
  /** The tool list of a native-protocol request (what the chat template renders into the system turn). */
  tools?: ToolSpec[];
}

export interface ToolDataResult {
  transcripts: Transcript[];
  /** Tasks left out, by reason. */
  dropped: Record<string, number>;
}

function pickPlan(u: number): ToolPlan {
  let acc = 0;
  for (const [plan, share] of PLAN_SHARES) {
    acc += share;
    if (u < acc) return plan;
  }
  return PLAN_SHARES[PLAN_SHARES.length - 1][0];
}

/** A tool call as the model writes it: the same bytes in hermes text as the chat template renders for a native call. */
export function hermesCallText(query: string): string {
  return toolCallText(SQL_TOOL_NAME, `{"query": ${JSON.stringify(query)}}`);
}

function callReply(query: string, protocol: ToolProtocol): ScriptedReply {
  return protocol === "native" ? { text: "", tool_calls: [{ name: SQL_TOOL_NAME, arguments: { query } }] } : hermesCallText(query);
}

/** Builds one transcript per task (train split only; a holdout task is an error). */
export async function buildToolTranscripts(tasks: Task[], opts: ToolDataOptions): Promise<ToolDataResult> {
  const held = tasks.find((t) => t.split !== "train");
  if (held) throw new T2sError("holdout_leak", `task ${held.id} has split "${held.split}"; tool-use data is made from train tasks only`);
  const singleShare = opts.singleShare ?? 0.2;
  const hermesShare = opts.hermesShare ?? 0.5;
  // per database: its columns and each column's distinct count, read once through the sandbox
  const facts = new Map<string, { columns: Map<string, string[]>; distinct: Map<string, number> }>();
  const schemaFacts = async (dbPath: string) => {
    let f = facts.get(dbPath);
    if (!f) {
      const columns = tableColumns(dbPath);
      const distinct = new Map<string, number>();
      for (const [table, cols] of columns) {
        for (const c of cols) {
          const r = await opts.executor.execute(dbPath, `SELECT COUNT(DISTINCT "${c}") FROM "${table}"`, { maxRows: 1, timeoutMs: QUERY_TIMEOUT_MS });
          if (r.ok) distinct.set(`${table}.${c}`, Number(r.rows[0][0]));
        }
      }
      facts.set(dbPath, (f = { columns, distinct }));
    }
    return f;
  };
  const envs = new Map<string, ReturnType<typeof defaultEnv>>();
  const envFor = (style: EpisodeStyle, protocol: ToolProtocol) => {
    const key = `${style}/${protocol}`;
    let env = envs.get(key);
    if (!env) envs.set(key, (env = defaultEnv({ executor: opts.executor, prompt: { style, protocol, maxToolCalls: opts.maxToolCalls }, preset: "tool-rl" })));
    return env;
  };
  // a tool query's result, run once (the database is read-only): the check that a probe is usable and the
  // episode that shows it share the run
  const toolRuns = new Map<string, Promise<ExecOutcome>>();
  const runTool = (task: Task, sql: string) => {
    const key = `${task.db_path}\u0000${sql}`;
    let run = toolRuns.get(key);
    if (!run) toolRuns.set(key, (run = envFor("tool", "native").runTool(task, sql)));
    return run;
  };
  const usable = async (task: Task, sql: string) => {
    const r = await runTool(task, sql);
    return r.ok && r.rows.length > 0;
  };
  const transcripts: Transcript[] = [];
  const dropped: Record<string, number> = {};
  const drop = (why: string) => (dropped[why] = (dropped[why] ?? 0) + 1);

  for (const [n, task] of tasks.entries()) {
    opts.onProgress?.(n, tasks.length);
    const rng = new SeededRandom(sampleSeed(opts.seed, "tool-data", task.id, 0));
    const single = rng.next() < singleShare;
    const protocol: ToolProtocol = rng.next() < hermesShare ? "hermes" : "native";
    let plan: ToolPlan = single ? "direct" : pickPlan(rng.next());
    let probes: Probe[] = [];
    if (plan === "probe" || plan === "probe_draft" || plan === "two_probes") {
      const db = await schemaFacts(task.db_path);
      const count = (table: string, column: string) => db.distinct.get(`${table}.${column}`) ?? Number.POSITIVE_INFINITY;
      const candidates: Probe[] = [];
      for (const p of probesFor(task.gold_sql, db.columns, count)) if (await usable(task, p.sql)) candidates.push(p);
      const specific = candidates.filter((p) => p.kind !== "count");
      const pool = specific.length ? specific : candidates;
      // each task draws from its own stream, so a draw skipped on an empty list changes no other task
      const first = pool.length ? rng.pick(pool) : undefined;
      if (!first) plan = "draft";
      else {
        probes = [first];
        if (plan === "two_probes") {
          const rest = candidates.filter((p) => p !== first);
          if (rest.length) probes.push(rng.pick(rest));
          else plan = "probe";
        }
      }
    }
    const queries = [...probes.map((p) => p.sql), ...(plan === "probe_draft" || plan === "draft" ? [task.gold_sql] : [])];
    const style: EpisodeStyle = single ? "single" : "tool";
    const replies: ScriptedReply[] = [...queries.map((q) => callReply(q, protocol)), "```sql\n" + task.gold_sql.trim() + "\n```"];
    const env = envFor(style, protocol);
    let opening = await env.opening(task);
    let paddingCalls: number | undefined;
    // drawn only for single-style tasks, after every other draw: the rest of the data is the same with or without padding
    if (single && opts.padding && rng.next() < opts.padding.share) {
      const { countTokens, maxTokens } = opts.padding;
      const bare = await countTokens(opening);
      const target = rng.between(bare, Math.max(bare, maxTokens));
      const db = await schemaFacts(task.db_path);
      const padded = await padOpening(opening, task.gold_sql, db.columns, { runTool: (q) => runTool(task, q), countTokens }, { tokens: target, seed: rng.below(2 ** 31) });
      opening = padded.messages;
      paddingCalls = padded.calls;
    }
    const policy = scriptedPolicy([{ replies }], "tool-data");
    const ep = await runEpisode(opening, { policy, runTool: (q) => runTool(task, q), grade: (reply, facts) => env.grade(task, reply, facts) }, {
      style, protocol, maxToolCalls: opts.maxToolCalls,
    });
    if (!ep.grade.correct) {
      drop(`committed answer graded ${ep.grade.outcome}`);
      continue;
    }
    if (ep.n_tool_calls !== queries.length || ep.invalid_tool_calls > 0) {
      drop("tool calls not run as planned");
      continue;
    }
    const native = style === "tool" && protocol === "native";
    transcripts.push({
      task_id: task.id, style, protocol: style === "tool" ? protocol : null, plan,
      probes: [...probes.map((p) => p.kind), ...(queries.length > probes.length ? ["draft"] : [])],
      ...(paddingCalls !== undefined ? { padding_calls: paddingCalls, train_from: opening.length } : {}),
      messages: ep.messages,
      ...(native ? { tools: [sqlToolSpec()] } : {}),
    });
  }
  opts.onProgress?.(tasks.length, tasks.length);
  return { transcripts, dropped };
}
