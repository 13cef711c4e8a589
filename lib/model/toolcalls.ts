/**
 * Tool calls in the hermes style that Qwen and many other chat templates teach:
 * `<tool_call>\n{"name": ..., "arguments": {...}}\n</tool_call>` blocks inside the assistant text.
 */

export interface ParsedToolCall {
  name: string;
  /** The arguments as JSON text (what the OpenAI protocol carries). */
  arguments: string;
}

/**
 * Splits a model reply into its plain content (blocks removed, trimmed; null when nothing is left) and the
 * well-formed tool calls. A block whose JSON does not parse, or has no name, stays in the content and is
 * counted in `invalid`, so a caller can tell a malformed call from no call.
 */
export function parseToolCalls(text: string): { content: string | null; calls: ParsedToolCall[]; invalid: number } {
  const calls: ParsedToolCall[] = [];
  let invalid = 0;
  const content = text.replace(/<tool_call>\s*([\s\S]*?)\s*<\/tool_call>/g, (block, body: string) => {
    try {
      const v = JSON.parse(body) as { name?: unknown; arguments?: unknown; parameters?: unknown };
      const args = v.arguments ?? v.parameters ?? {};
      if (typeof v.name !== "string" || v.name === "") throw new Error("no name");
      calls.push({ name: v.name, arguments: typeof args === "string" ? args : JSON.stringify(args) });
      return "";
    } catch {
      invalid++;
      return block;
    }
  });
  const trimmed = content.trim();
  return { content: trimmed === "" ? null : trimmed, calls, invalid };
}
