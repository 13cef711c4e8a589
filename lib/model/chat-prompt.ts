/** Messages to chat-template text, and a guided reply back to its tool call (lib/model/chat.ts). */
import type { ChatMessage } from "./chat-types.js";
import type { ChatTokenizer, TemplateMessage } from "./tokenizer.js";
import type { ParsedToolCall } from "./toolcalls.js";

/** Tool call arguments arrive as JSON text; templates expect objects, so parse what parses. */
function templateMessages(messages: ChatMessage[]): TemplateMessage[] {
  return messages.map((m) => {
    const out: TemplateMessage = { role: m.role, content: m.content ?? "" };
    if (m.tool_calls?.length) {
      out.tool_calls = m.tool_calls.map((c) => {
        let args: unknown = c.function.arguments;
        if (typeof args === "string") {
          try {
            args = JSON.parse(args);
          } catch {
            // keep the text: templates print strings as they are
          }
        }
        // an id the client left out stays out of the template
        return { id: c.id || undefined, type: "function", function: { name: c.function.name, arguments: args } };
      });
    }
    if (m.tool_call_id) out.tool_call_id = m.tool_call_id;
    if (m.name) out.name = m.name;
    return out;
  });
}

/**
 * The chat template's text of a conversation: the one place the kit turns messages into template text (the
 * chat engine's prompts, the server's /tokenize, SFT examples and conversations, `t2s generate`). With
 * `addGenerationPrompt` the text ends where the assistant's reply starts.
 */
export function renderChat(tok: ChatTokenizer, messages: ChatMessage[], opts: { tools?: unknown[]; addGenerationPrompt?: boolean; extra?: Record<string, unknown> } = {}): string {
  return tok.applyChatTemplate(templateMessages(messages), opts);
}

/**
 * The ids of a chat request's prompt as the chat engine builds them (its template with the generation
 * prompt, no extra special tokens): what the model reads before its reply, for counting and planning.
 */
export function promptIds(tok: ChatTokenizer, messages: ChatMessage[], tools?: unknown[]): number[] {
  return tok.encode(renderChat(tok, messages, { tools, addGenerationPrompt: true }), { addSpecialTokens: false });
}

/** The call a completed guided reply `{"name": ..., "arguments": {...}}` holds (null if it is not one). */
export function guidedCall(text: string): { content: null; calls: ParsedToolCall[]; invalid: number } | null {
  try {
    const v = JSON.parse(text) as { name?: unknown; arguments?: unknown };
    if (typeof v?.name !== "string") return null;
    return { content: null, calls: [{ name: v.name, arguments: JSON.stringify(v.arguments ?? {}) }], invalid: 0 };
  } catch {
    return null;
  }
}

