/**
 * The episode loop: prompt -> model <-> read-only SQL tool (at most N calls) -> one graded reply.
 * The tool runner and the grader are passed in, so the loop knows nothing about databases or verifiers
 * and can be driven by fakes. Grading always uses the turn the style asks for: the first reply in single
 * style, the committing reply in tool style, so a follow-up turn is never graded by mistake.
 */
import type { ExecOutcome } from "../db/types.js";
import type { GradeResult } from "../verifier/types.js";
import { CONTEXT_EXCEEDED, PolicyError, type ChatMessage, type Completion, type FinishReason, type Policy, type SampleOptions, type Sampling } from "../policy/types.js";
import { toolResponseText } from "../model/toolcalls.js";
import type { EpisodeStyle, ToolProtocol } from "./prompt.js";
import { checkCall, fromNative, hasHermesCall, hasSolution, parseHermesCalls, sqlToolSpec, type RawCall } from "./tools.js";
import { formatToolResult, type ToolOutputOptions } from "./truncate.js";
import { MAX_TOOL_CALLS } from "../core/defaults.js";

/** Facts about the graded reply that the grader needs besides its text. */
export interface GradeFacts {
  finishReason: FinishReason;
  invalidToolCalls: number;
  /** Text of every assistant turn so far (evidence rules look at them). */
  assistantTurns: string[];
  /** The tool query the sandbox refused as unsafe, when it ended the episode (endOnUnsafeTool). */
  unsafeToolQuery?: string;
}

export interface EpisodeDeps {
  policy: Policy;
  /** Runs one tool query on the task's database (read-only executor, small row cap). */
  runTool: (query: string) => Promise<ExecOutcome>;
  /** Grades the committed reply text. */
  grade: (reply: string, facts: GradeFacts) => Promise<GradeResult>;
}

export type { Sampling };

export interface EpisodeOptions {
  style: EpisodeStyle;
  protocol?: ToolProtocol;
  /** Tool calls per episode (default MAX_TOOL_CALLS); a call beyond it ends the episode as truncated. */
  maxToolCalls?: number;
  /** Total context budget in tokens (prompt + reply); a turn that would pass it is not sent. */
  maxContextTokens?: number;
  sampling?: Sampling;
  toolOutput?: ToolOutputOptions;
  /** An unsafe tool query (one the sandbox refuses: writes, PRAGMA, ATTACH, ...) ends the episode and is graded `unsafe` (the tool-rl preset's rule); otherwise it is answered with its error and counted invalid. */
  endOnUnsafeTool?: boolean;
  onRetry?: (reason: string, attempt: number) => void;
  signal?: AbortSignal;
}

export type TruncatedBy = "max_tokens" | "context" | "tool_calls";

export interface EpisodeResult {
  /** The whole conversation, system prompt first. */
  messages: ChatMessage[];
  n_assistant_turns: number;
  /** 1-based index of the graded assistant turn among those the model wrote here (0 when it never answered). */
  graded_turn: number;
  graded_text: string;
  grade: GradeResult;
  finish_reason: FinishReason;
  tokens_in: number;
  tokens_out: number;
  latency_ms: number;
  n_tool_calls: number;
  invalid_tool_calls: number;
  truncated_by: TruncatedBy | null;
  /** The endpoint that answered the graded turn, when the policy reports one (an OpenAI fleet). */
  endpoint?: string;
}

const NO_CALLS_LEFT = "\n(no tool calls left: give your final answer now)";

function chars(messages: ChatMessage[]): number {
  return messages.reduce((s, m) => s + (m.content?.length ?? 0) + (m.tool_calls ? JSON.stringify(m.tool_calls).length : 0), 0);
}

/**
 * Answers one tool call as an episode does: the text of the tool turn (a checked call's result rendered
 * and truncated, or the error sent back for an unusable call) and whether the call counts as invalid.
 * Exported so services that stand in for the episode's tool (lib/envserve) answer with the same bytes.
 */
export async function answerCall(raw: RawCall, runTool: EpisodeDeps["runTool"], toolOutput?: ToolOutputOptions): Promise<{ content: string; invalid: boolean; unsafe?: string }> {
  const checked = checkCall(raw);
  if (checked.ok === false) return { content: `error: ${checked.error}`, invalid: true };
  const outcome = await runTool(checked.query);
  const unsafe = outcome.ok === false && outcome.error.kind === "unsafe";
  return { content: formatToolResult(outcome, toolOutput), invalid: unsafe, ...(unsafe ? { unsafe: checked.query } : {}) };
}

async function answerCalls(calls: RawCall[], deps: EpisodeDeps, opts: EpisodeOptions): Promise<{ contents: string[]; invalid: number; unsafe?: string }> {
  const contents: string[] = [];
  let invalid = 0;
  let unsafe: string | undefined;
  for (const raw of calls) {
    const a = await answerCall(raw, deps.runTool, opts.toolOutput);
    if (a.invalid) invalid++;
    contents.push(a.content);
    unsafe ??= a.unsafe;
  }
  return { contents, invalid, ...(unsafe !== undefined ? { unsafe } : {}) };
}

function toolMessages(calls: RawCall[], contents: string[]): ChatMessage[] {
  const out: ChatMessage[] = [];
  const hermes: string[] = [];
  calls.forEach((c, i) => {
    if (c.source === "native") out.push({ role: "tool", tool_call_id: c.id, name: c.name, content: contents[i] });
    else hermes.push(toolResponseText(contents[i]));
  });
  if (hermes.length) out.push({ role: "user", content: hermes.join("\n") });
  return out;
}

/** Runs one episode from its opening messages and returns the conversation, counts and the grade. */
export async function runEpisode(opening: ChatMessage[], deps: EpisodeDeps, opts: EpisodeOptions): Promise<EpisodeResult> {
  const messages = [...opening];
  const protocol = opts.protocol ?? "native";
  const maxCalls = opts.maxToolCalls ?? MAX_TOOL_CALLS;
  const s = opts.sampling ?? {};
  let turns = 0, tokensIn = 0, tokensOut = 0, latency = 0, callsUsed = 0, invalid = 0;
  let lastFinish: FinishReason = "stop";
  let truncatedBy: TruncatedBy | null = null;
  let contextEstimate = Math.ceil(chars(messages) / 4);
  let graded = 0;
  let unsafeTool: string | undefined;
  const endpoints: Array<string | undefined> = [];

  for (;;) {
    if (opts.maxContextTokens && turns > 0 && contextEstimate + (s.max_tokens ?? 0) > opts.maxContextTokens) {
      truncatedBy = "context";
      break;
    }
    const request: SampleOptions & { tools?: ReturnType<typeof sqlToolSpec>[] } = {
      temperature: s.temperature, top_p: s.top_p, max_tokens: s.max_tokens, stop: s.stop,
      seed: s.seed === undefined ? undefined : (s.seed + turns) % 2147483647,
      onRetry: opts.onRetry, signal: opts.signal,
    };
    if (opts.style === "tool" && protocol === "native") request.tools = [sqlToolSpec()];
    let c: Completion;
    try {
      c = (await deps.policy.complete(messages, request))[0];
    } catch (e) {
      // a later turn that outgrew the window is the episode's own doing (its tool results, its replies);
      // the first turn's prompt is all setup, so its refusal is rethrown as the setup error it is
      if (e instanceof PolicyError && e.reason === CONTEXT_EXCEEDED && turns > 0) {
        truncatedBy = "context";
        break;
      }
      throw e;
    }
    turns++;
    endpoints.push(c.endpoint);
    tokensIn += c.tokens_in;
    tokensOut += c.tokens_out;
    latency += c.latency_ms;
    const assistant: ChatMessage = { role: "assistant", content: c.text };
    if (c.tool_calls.length) assistant.tool_calls = c.tool_calls;
    messages.push(assistant);
    lastFinish = c.finish_reason;
    graded = turns;
    if (c.finish_reason === "length") {
      truncatedBy = "max_tokens";
      break;
    }
    if (opts.style === "single") break;

    const calls = c.tool_calls.length ? fromNative(c.tool_calls) : hasHermesCall(c.text) ? parseHermesCalls(c.text, `call_${turns}`) : [];
    if (calls.length === 0 || hasSolution(c.text)) break;
    if (callsUsed + calls.length > maxCalls) {
      truncatedBy = "tool_calls";
      break;
    }
    const answered = await answerCalls(calls, deps, opts);
    callsUsed += calls.length;
    invalid += answered.invalid;
    if (answered.unsafe !== undefined && opts.endOnUnsafeTool) {
      unsafeTool = answered.unsafe;
      messages.push(...toolMessages(calls, answered.contents));
      break;
    }
    if (callsUsed >= maxCalls) answered.contents[answered.contents.length - 1] += NO_CALLS_LEFT;
    const added = toolMessages(calls, answered.contents);
    messages.push(...added);
    const used = c.tokens_in + c.tokens_out;
    contextEstimate = (used > 0 ? used : Math.ceil(chars(messages.slice(0, -added.length)) / 4)) + Math.ceil(chars(added) / 4);
  }

  // single style grades the first reply whatever follows; tool style the last (committing or cut) reply.
  // Turns are counted from the end of the opening: assistant turns it already holds (context padding,
  // lib/episode/padding.ts) are setup, never the model's reply
  const gradedTurn = opts.style === "single" ? Math.min(1, turns) : graded;
  const assistantTurns = messages.slice(opening.length).filter((m) => m.role === "assistant").map((m) => m.content ?? "");
  const gradedText = gradedTurn > 0 ? assistantTurns[gradedTurn - 1] : "";
  const finish: FinishReason = truncatedBy ? "length" : lastFinish;
  let grade = await deps.grade(gradedText, { finishReason: finish, invalidToolCalls: invalid, assistantTurns: assistantTurns.slice(0, gradedTurn), ...(unsafeTool !== undefined ? { unsafeToolQuery: unsafeTool } : {}) });
  if (truncatedBy && grade.outcome !== "truncated") {
    grade = { ...grade, outcome: "truncated", correct: false, reward: Math.min(grade.reward, 0), reason: `truncated by the ${truncatedBy.replace("_", " ")} budget` };
  }
  return {
    messages,
    n_assistant_turns: turns,
    graded_turn: gradedTurn,
    graded_text: gradedText,
    grade,
    finish_reason: finish,
    tokens_in: tokensIn,
    tokens_out: tokensOut,
    latency_ms: latency,
    n_tool_calls: callsUsed,
    invalid_tool_calls: invalid,
    truncated_by: truncatedBy,
    ...(gradedTurn > 0 && endpoints[gradedTurn - 1] !== undefined ? { endpoint: endpoints[gradedTurn - 1] } : {}),
  };
}
