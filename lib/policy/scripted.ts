/**
 * `scripted:<file>`: replays replies written in advance, for tests and dry runs. The file holds JSON
 * entries (a JSON array or one per line) `{ "match"?: "text", "replies": [reply, ...] }`. A request uses
 * the first entry whose `match` occurs in its first user message (an entry without `match` matches any);
 * its N-th assistant turn gets `replies[N]` (the last one repeats). A reply is a string or
 * `{ "text"?, "tool_calls"?: [{ "name", "arguments" }], "finish_reason"? }`.
 */
import { readFileSync, existsSync } from "node:fs";
import { T2sError } from "../core/errors.js";
import { parseJsonl } from "../core/jsonl.js";
import type { ChatMessage, Completion, FinishReason, Policy, SampleOptions, ToolCall } from "./types.js";

export type ScriptedReply =
  | string
  | { text?: string; tool_calls?: Array<{ name: string; arguments: unknown }>; finish_reason?: FinishReason; tokens_out?: number };

export interface ScriptEntry {
  match?: string;
  replies: ScriptedReply[];
}

/** Reads a script file (JSON array or JSONL of entries); throws T2sError naming the file on bad content. */
export function readScript(path: string): ScriptEntry[] {
  if (!existsSync(path)) throw new T2sError("not_found", `scripted policy: no such file ${path}`);
  const text = readFileSync(path, "utf8");
  const entries = text.trimStart().startsWith("[") ? (JSON.parse(text) as unknown[]) : parseJsonl(text, path).records;
  entries.forEach((e, i) => {
    const r = (e as ScriptEntry)?.replies;
    if (!Array.isArray(r) || r.length === 0) throw new T2sError("bad_script", `${path}: entry ${i + 1} needs a non-empty "replies" list`);
  });
  return entries as ScriptEntry[];
}

function toCompletion(reply: ScriptedReply, turn: number): Completion {
  const r = typeof reply === "string" ? { text: reply } : reply;
  const calls: ToolCall[] = (r.tool_calls ?? []).map((c, i) => ({
    id: `call_${turn}_${i}`,
    type: "function",
    function: { name: c.name, arguments: typeof c.arguments === "string" ? c.arguments : JSON.stringify(c.arguments) },
  }));
  const text = r.text ?? "";
  return {
    text,
    tool_calls: calls,
    finish_reason: r.finish_reason ?? (calls.length ? "tool_calls" : "stop"),
    tokens_in: 0,
    tokens_out: r.tokens_out ?? Math.ceil(text.length / 4),
    latency_ms: 0,
  };
}

/** A Policy that answers from `entries`; throws T2sError("no_script") for a request no entry matches. */
export function scriptedPolicy(entries: ScriptEntry[], name = "scripted"): Policy {
  return {
    name,
    model: "scripted",
    adapter: null,
    async complete(messages: ChatMessage[], opts: SampleOptions): Promise<Completion[]> {
      const firstUser = messages.find((m) => m.role === "user")?.content ?? "";
      const entry = entries.find((e) => e.match === undefined || firstUser.includes(e.match));
      if (!entry) throw new T2sError("no_script", `scripted policy: no entry matches the question '${firstUser.slice(0, 80)}'`);
      const turn = messages.filter((m) => m.role === "assistant").length;
      const reply = entry.replies[Math.min(turn, entry.replies.length - 1)];
      const promptChars = messages.reduce((s, m) => s + (m.content?.length ?? 0), 0);
      const n = opts.n ?? 1;
      return Array.from({ length: n }, () => ({ ...toCompletion(reply, turn), tokens_in: Math.ceil(promptChars / 4) }));
    },
  };
}
