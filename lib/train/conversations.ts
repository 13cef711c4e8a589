/**
 * SFT on conversations: a JSONL file of `{"messages": [...], "tools"?: [...]}` records (the OpenAI chat
 * layout TRL calls "conversational"), each rendered with the model's chat template exactly as the chat
 * layer renders an episode's prompt, and trained on every assistant turn (its text, its tool calls and
 * the end-of-turn token) while system, user and tool turns stay masked (and assistant turns before a
 * record's `train_from`, which are context).
 */
import { T2sError } from "../core/errors.js";
import { readJsonl } from "../core/jsonl.js";
import { renderChat } from "../model/chat.js";
import { commonPrefix } from "../model/prefix.js";
import type { ChatTokenizer } from "../model/tokenizer.js";
import type { ChatMessage, ToolSpec } from "../policy/types.js";
import type { TokenRow } from "./batching.js";

export interface Conversation {
  messages: ChatMessage[];
  /** Tools sent with the request (native tool calling); absent for plain chats and hermes-text tools. */
  tools?: ToolSpec[];
  /**
   * Index of the first message whose assistant turns are trained (default 0): assistant turns before it are
   * context only, as the padding turns of a padded opening (t2s recipe tool-data --pad-share).
   */
  train_from?: number;
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
    const from = r.train_from ?? 0;
    if (!Number.isInteger(from) || (from as number) < 0 || (from as number) >= messages.length) throw new T2sError("bad_conversation", `${where}: "train_from" must be a message index (0 to ${messages.length - 1}), got ${JSON.stringify(r.train_from)}`);
    if (!messages.slice(from as number).some((m) => (m as ChatMessage).role === "assistant")) throw new T2sError("bad_conversation", `${where} has no assistant turn to train on${from ? ` from message ${(from as number) + 1} (train_from)` : ""}`);
    if (r.tools !== undefined && !Array.isArray(r.tools)) throw new T2sError("bad_conversation", `${where}: "tools" must be a list`);
    return { messages: messages as ChatMessage[], ...(r.tools ? { tools: r.tools as ToolSpec[] } : {}), ...(from ? { train_from: from as number } : {}) };
  });
}

const headers = new WeakMap<ChatTokenizer, number[]>();

/** The ids of the generation prompt alone (`<|im_start|>assistant\n` in ChatML), rendered once per tokenizer. */
function generationHeader(tok: ChatTokenizer): number[] {
  let ids = headers.get(tok);
  if (!ids) headers.set(tok, (ids = tok.encode(renderChat(tok, [], { addGenerationPrompt: true }), { addSpecialTokens: false })));
  return ids;
}

function indexOfSeq(ids: number[], seq: number[], from: number): number {
  outer: for (let i = from; i + seq.length <= ids.length; i++) {
    for (let j = 0; j < seq.length; j++) if (ids[i + j] !== seq[j]) continue outer;
    return i;
  }
  return -1;
}

/**
 * The token row of one conversation. Each assistant turn is trained from where the rendered conversation
 * stops matching the prompt the chat layer would send for that turn (the generation prompt) through the
 * turn's end-of-turn token, so what is trained is exactly what a sampled turn generates. The common case
 * takes one render: each turn starts right after a generation-prompt header (`<|im_start|>assistant\n`
 * in ChatML) found in the rendered ids; when the headers cannot be matched one to one with the assistant
 * messages (another template, or a header merged with its first token), each turn's prompt is rendered.
 */
export function conversationExample(tok: ChatTokenizer, conv: Conversation): TokenRow {
  const render = (messages: ChatMessage[], addGenerationPrompt: boolean) =>
    tok.encode(renderChat(tok, messages, { tools: conv.tools, addGenerationPrompt }), { addSpecialTokens: false });
  const ids = render(conv.messages, false);
  const eos = new Set(tok.eosIds);
  const turns = conv.messages.filter((m) => m.role === "assistant").length;
  const opening = conv.messages.findIndex((m) => m.role === "assistant");
  let starts = headerStarts(tok, ids, render(conv.messages.slice(0, opening), true), turns);
  if (!starts) starts = conv.messages.flatMap((m, i) => (m.role === "assistant" ? [commonPrefix([render(conv.messages.slice(0, i), true), ids])] : []));
  // assistant turns before train_from are context: their starts are dropped, so they stay masked
  const context = conv.messages.slice(0, conv.train_from ?? 0).filter((m) => m.role === "assistant").length;
  const mask = new Array<number>(ids.length).fill(0);
  for (const start of starts.slice(context)) {
    let end = start;
    while (end < ids.length && !eos.has(ids[end])) end++;
    if (end >= ids.length) throw new T2sError("bad_conversation", "an assistant turn does not end with the model's end-of-turn token; the chat template and the tokenizer disagree");
    for (let t = start; t <= end; t++) mask[t] = 1;
  }
  return { ids, mask };
}

/**
 * Where each assistant turn starts, from one render: the first turn where the rendered ids leave the first
 * turn's prompt, each later one after the next repeat of the generation-prompt header; null when the
 * header is not found exactly once per turn.
 */
function headerStarts(tok: ChatTokenizer, ids: number[], firstPrompt: number[], turns: number): number[] | null {
  const first = commonPrefix([firstPrompt, ids]);
  const generationPrompt = generationHeader(tok);
  if (generationPrompt.length === 0 || indexOfSeq(firstPrompt, generationPrompt, firstPrompt.length - generationPrompt.length) < 0) return null;
  const starts = [first];
  let at = first;
  for (;;) {
    const i = indexOfSeq(ids, generationPrompt, at);
    if (i < 0) break;
    starts.push(i + generationPrompt.length);
    at = i + generationPrompt.length;
  }
  return starts.length === turns ? starts : null;
}
