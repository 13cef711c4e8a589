/**
 * The SQL tool and both ways a model may call it: native OpenAI `tool_calls`, and hermes text calls
 * (`<tool_call>{"name": ..., "arguments": {...}}</tool_call>` inside the reply), which is what servers
 * without a tool parser pass through and what small chat models are trained to write.
 */
import { TOOL_CALL_OPEN, toolCallBlocks } from "../model/toolcalls.js";
import type { ToolCall, ToolSpec } from "../policy/types.js";

export const SQL_TOOL_NAME = "execute_sql_query";

/** The OpenAI function definition of the read-only SQL tool. */
export function sqlToolSpec(): ToolSpec {
  return {
    type: "function",
    function: {
      name: SQL_TOOL_NAME,
      description: "Run one read-only SQLite query (SELECT or WITH) against the database and see its first rows or its error.",
      parameters: {
        type: "object",
        properties: { query: { type: "string", description: "The SQLite query to run." } },
        required: ["query"],
      },
    },
  };
}

/** One call the model made, before validation. */
export interface RawCall {
  id: string;
  name: string;
  /** The arguments JSON text as written, or null when the call itself could not be parsed. */
  arguments: string | null;
  source: "native" | "hermes";
  /** Why the call is unusable (set at parse time for hermes blocks that are not JSON). */
  parseError?: string;
}

/** A call checked against the tool's contract: either a query to run or an error to answer with. */
export type CheckedCall = { ok: true; call: RawCall; query: string } | { ok: false; call: RawCall; error: string };

/** True when the text holds a hermes tool call opening tag. */
export function hasHermesCall(text: string): boolean {
  return text.includes(TOOL_CALL_OPEN);
}

/**
 * Returns the hermes tool calls in `text`, in order (lib/model/toolcalls.ts reads the blocks). A block that
 * is not a JSON object with a "name", or an opening tag never closed (a reply cut off mid-call), comes back
 * with `parseError` set.
 */
export function parseHermesCalls(text: string, idPrefix = "hermes"): RawCall[] {
  return toolCallBlocks(text).map((b, i): RawCall => {
    const id = `${idPrefix}_${i}`;
    if (!b.call) return { id, name: "", arguments: null, source: "hermes", parseError: b.error };
    return { id, name: b.call.name, arguments: b.call.arguments, source: "hermes" };
  });
}

/** Native calls as RawCalls. */
export function fromNative(calls: ToolCall[]): RawCall[] {
  return calls.map((c) => ({ id: c.id, name: c.function.name, arguments: c.function.arguments, source: "native" as const }));
}

/** Checks a call names the SQL tool and carries a non-empty string "query"; returns the query or the error to send back. */
export function checkCall(call: RawCall): CheckedCall {
  if (call.parseError) return { ok: false, call, error: call.parseError };
  if (call.name !== SQL_TOOL_NAME) return { ok: false, call, error: `unknown tool '${call.name}'; the only tool is ${SQL_TOOL_NAME}(query)` };
  let args: unknown;
  try {
    args = JSON.parse(call.arguments ?? "");
  } catch (e) {
    return { ok: false, call, error: `the arguments are not valid JSON (${(e as Error).message}); send {"query": "SELECT ..."}` };
  }
  const query = (args as { query?: unknown })?.query;
  if (typeof query !== "string" || query.trim() === "") {
    return { ok: false, call, error: 'the arguments need a non-empty string "query", e.g. {"query": "SELECT ..."}' };
  }
  return { ok: true, call, query };
}

/** True when the reply commits to a final answer (a <solution> block), which wins over any tool call in it. */
export function hasSolution(text: string): boolean {
  return /<solution>[\s\S]*<\/solution>/i.test(text);
}
