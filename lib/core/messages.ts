/** The chat message: the one shape every layer passes conversations in (OpenAI's, with native tool calls). */

/** A tool call as the OpenAI protocol carries it; `arguments` is the raw JSON text the model wrote. */
export interface ToolCall {
  id: string;
  type: "function";
  function: { name: string; arguments: string };
}

export type ChatRole = "system" | "user" | "assistant" | "tool";

/**
 * A chat message: the kit's one message type, from task exports and the HTTP layer (lib/serve maps OpenAI
 * bodies onto it) through the policies and episodes to the chat template (lib/model).
 */
export interface ChatMessage {
  role: ChatRole;
  content: string | null;
  /** Assistant turns that called tools natively. */
  tool_calls?: ToolCall[];
  /** Tool results answer the call with this id. */
  tool_call_id?: string;
  name?: string;
}
