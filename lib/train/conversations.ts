/**
 * SFT on conversations: a JSONL file of `{"messages": [...], "tools"?: [...]}` records (the OpenAI chat
 * layout TRL calls "conversational"), each rendered with the model's chat template exactly as the chat
 * layer renders an episode's prompt, and trained on every assistant turn (its text, its tool calls and
 * the end-of-turn token) while system, user and tool turns stay masked.
 */
import { T2sError } from "../errors.js";
import { readJsonl } from "../jsonl.js";
import { templateMessages } from "../model/chat.js";
import type { ChatTokenizer } from "../model/tokenizer.js";
import type { ChatMessage, ToolSpec } from "../policy/types.js";
import type { TokenRow } from "./batching.js";

export interface Conversation {
  messages: ChatMessage[];
  /** Tools sent with the request (native tool calling); absent for plain chats and hermes-text tools. */
  tools?: ToolSpec[];
}

const ROLES = new Set(["system", "user", "assistant", "tool"]);

/** Reads and checks a conversations file; errors name the file and the record. */
export function readConversations(path: string): Conversation[] {
  const { records } = readJsonl<Record<string, unknown>>(path);
  if (records.length === 0) throw new T2sError("no_examples", `${path}: no conversations`);
  return records.map((r, i) => {
    const where = `${path}: record ${i + 1}`;
    const messages = r?.messages;
    if (!Array.isArray(messages) || messages.length === 0) throw new T2sError("bad_conversation", `${where} needs a non-empty "messages" list`);
    for (const [j, m] of messages.entries()) {
      const msg = m as ChatMessage;
      if (!msg || !ROLES.has(msg.role)) throw new T2sError("bad_conversation", `${where}, message ${j + 1}: role must be system, user, assistant or tool, got ${JSON.stringify(msg?.role)}`);
      if (msg.content !== null && typeof msg.content !== "string") throw new T2sError("bad_conversation", `${where}, message ${j + 1}: content must be a string or null`);
    }
    if (!messages.some((m) => (m as ChatMessage).role === "assistant")) throw new T2sError("bad_conversation", `${where} has no assistant turn to train on`);
    if (r.tools !== undefined && !Array.isArray(r.tools)) throw new T2sError("bad_conversation", `${where}: "tools" must be a list`);
    return { messages: messages as ChatMessage[], ...(r.tools ? { tools: r.tools as ToolSpec[] } : {}) };
  });
}

function commonPrefix(a: number[], b: number[]): number {
  let k = 0;
  while (k < a.length && k < b.length && a[k] === b[k]) k++;
  return k;
}

/**
 * The token row of one conversation. Each assistant turn is trained from where the rendered conversation
 * stops matching the prompt the chat layer would send for that turn (the generation prompt) through the
 * turn's end-of-turn token, so what is trained is exactly what a sampled turn generates.
 */
export function conversationExample(tok: ChatTokenizer, conv: Conversation): TokenRow {
  const render = (messages: ChatMessage[], addGenerationPrompt: boolean) =>
    tok.encode(tok.applyChatTemplate(templateMessages(messages), { tools: conv.tools, addGenerationPrompt }), { addSpecialTokens: false });
  const ids = render(conv.messages, false);
  const mask = new Array<number>(ids.length).fill(0);
  const eos = new Set(tok.eosIds);
  conv.messages.forEach((m, i) => {
    if (m.role !== "assistant") return;
    const start = commonPrefix(render(conv.messages.slice(0, i), true), ids);
    let end = start;
    while (end < ids.length && !eos.has(ids[end])) end++;
    if (end >= ids.length) throw new T2sError("bad_conversation", "an assistant turn does not end with the model's end-of-turn token; the chat template and the tokenizer disagree");
    for (let t = start; t <= end; t++) mask[t] = 1;
  });
  return { ids, mask };
}
