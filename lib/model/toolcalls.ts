/**
 * Tool calls in the hermes style that Qwen and many other chat templates teach:
 * `<tool_call>\n{"name": ..., "arguments": {...}}\n</tool_call>` blocks inside the assistant text.
 */

export interface ParsedToolCall {
  name: string;
  /** The arguments as JSON text (what the OpenAI protocol carries). */
  arguments: string;
}

/** A tool call in the OpenAI form (`tool_calls` of a message or a choice). */
export interface OpenAiToolCall {
  id: string;
  type: "function";
  function: { name: string; arguments: string };
}

let counter = 0;
/** A fresh id with a prefix ("chatcmpl", "cmpl", "call") for the OpenAI protocol's objects. */
export function newId(prefix: string): string {
  counter = (counter + 1) % 1e9;
  return `${prefix}-${Date.now().toString(36)}${counter.toString(36)}`;
}

/** Parsed calls in the OpenAI form, each with a fresh "call" id: the server's replies, the in-process policy. */
export function openAiToolCalls(calls: ParsedToolCall[]): OpenAiToolCall[] {
  return calls.map((c) => ({ id: newId("call"), type: "function" as const, function: { name: c.name, arguments: c.arguments } }));
}

export const TOOL_CALL_OPEN = "<tool_call>";
export const TOOL_CALL_CLOSE = "</tool_call>";
const OPEN = TOOL_CALL_OPEN;
const CLOSE = TOOL_CALL_CLOSE;

/**
 * A call written as hermes text, `<tool_call>\n{"name": "<name>", "arguments": <arguments>}\n</tool_call>`:
 * the bytes the kit's chat template renders for a native call. `argumentsJson` goes in as written.
 */
export function toolCallText(name: string, argumentsJson: string): string {
  return `${OPEN}\n{"name": ${JSON.stringify(name)}, "arguments": ${argumentsJson}}\n${CLOSE}`;
}

/** A tool result written as hermes text (the bytes the kit's chat template renders for a native tool turn). */
export function toolResponseText(content: string): string {
  return `<tool_response>\n${content}\n</tool_response>`;
}

/** The results of the `<tool_response>` blocks in a (user) turn's text, in order. */
export function toolResponseBodies(text: string): string[] {
  return [...text.matchAll(/<tool_response>\n([\s\S]*?)\n<\/tool_response>/g)].map((m) => m[1]);
}

/** One `<tool_call>` block of a reply: where it is, and the call it holds or why it holds none. */
export interface ToolCallBlock {
  /** Offsets of the block, from its opening tag to past its closing tag (the text's end when unclosed). */
  start: number;
  end: number;
  closed: boolean;
  call?: ParsedToolCall;
  error?: string;
}

/**
 * The `<tool_call>` blocks of `text`, in order: each opening tag up to the first closing tag after it; an
 * opening tag never closed (a reply cut off mid-call) ends the list. A block whose body is not a JSON object
 * with a string "name" carries `error`; arguments may be given as "arguments" or "parameters".
 */
export function toolCallBlocks(text: string): ToolCallBlock[] {
  const blocks: ToolCallBlock[] = [];
  let at = 0;
  for (;;) {
    const start = text.indexOf(OPEN, at);
    if (start < 0) break;
    const close = text.indexOf(CLOSE, start + OPEN.length);
    if (close < 0) {
      blocks.push({ start, end: text.length, closed: false, error: "the <tool_call> block is not closed with </tool_call>" });
      break;
    }
    const end = close + CLOSE.length;
    at = end;
    let parsed: unknown;
    try {
      parsed = JSON.parse(text.slice(start + OPEN.length, close).trim());
    } catch (e) {
      blocks.push({ start, end, closed: true, error: `the tool call is not valid JSON (${(e as Error).message})` });
      continue;
    }
    const obj = parsed as { name?: unknown; arguments?: unknown; parameters?: unknown };
    if (!obj || typeof obj !== "object" || typeof obj.name !== "string") {
      blocks.push({ start, end, closed: true, error: 'the tool call needs {"name": ..., "arguments": {...}}' });
      continue;
    }
    const args = obj.arguments ?? obj.parameters ?? {};
    blocks.push({ start, end, closed: true, call: { name: obj.name, arguments: typeof args === "string" ? args : JSON.stringify(args) } });
  }
  return blocks;
}

/**
 * Splits a model reply into its plain content (blocks removed, trimmed; null when nothing is left) and the
 * well-formed tool calls. A closed block with no usable call (bad JSON, no name or an empty one: nothing to
 * send over the protocol) stays in the content and is counted in `invalid`, so a caller can tell a
 * malformed call from no call; an unclosed block stays in the content uncounted.
 */
export function parseToolCalls(text: string): { content: string | null; calls: ParsedToolCall[]; invalid: number } {
  const calls: ParsedToolCall[] = [];
  let invalid = 0;
  let content = "";
  let at = 0;
  for (const b of toolCallBlocks(text)) {
    if (!b.closed) break;
    if (b.call && b.call.name !== "") {
      calls.push(b.call);
      content += text.slice(at, b.start);
      at = b.end;
    } else invalid++;
  }
  const trimmed = (content + text.slice(at)).trim();
  return { content: trimmed === "" ? null : trimmed, calls, invalid };
}


/**
 * The opening of a hermes call that a forced tool_choice writes into the assistant turn (through the prompt
 * ids) so the model can only continue a call: `<tool_call>\n{"name": "` and, for a named function, the name
 * and the start of its arguments.
 */
export function forcedToolCallPrefill(name?: string): string {
  return name === undefined ? `${OPEN}\n{"name": "` : `${OPEN}\n{"name": ${JSON.stringify(name)}, "arguments": `;
}

/**
 * Parses a reply that began with forcedToolCallPrefill: always at least one call. Well-formed blocks are
 * taken as they are; otherwise the first block is read leniently (the name up to its closing quote, or the
 * forced name; the arguments as the model wrote them, which, as OpenAI warns, need not be valid JSON).
 */
export function parseForcedToolCalls(text: string, name?: string): { content: string | null; calls: ParsedToolCall[]; invalid: number } {
  const strict = parseToolCalls(text.includes(CLOSE) ? text : `${text}\n${CLOSE}`);
  if (strict.calls.length && (name === undefined || strict.calls[0].name === name)) return strict;
  let body = text.slice(OPEN.length);
  const end = body.indexOf(CLOSE);
  if (end >= 0) body = body.slice(0, end);
  let callName = name;
  let args: string;
  if (callName === undefined) {
    const m = /^\s*\{\s*"name"\s*:\s*"([^"]*)"?\s*,?\s*(?:"arguments"\s*:\s*)?([\s\S]*)$/.exec(body);
    callName = m?.[1] ?? "";
    args = m?.[2] ?? "";
  } else {
    args = body.replace(/^\s*\{\s*"name"\s*:\s*"(?:[^"\\]|\\.)*"\s*,\s*"arguments"\s*:\s*/, "");
  }
  args = args.trim();
  // the wrapper object's own closing brace follows the arguments
  const opens = (args.match(/\{/g) ?? []).length;
  const closes = (args.match(/\}/g) ?? []).length;
  if (closes > opens && args.endsWith("}")) args = args.slice(0, -1).trimEnd();
  return { content: null, calls: [{ name: callName, arguments: args }], invalid: 1 };
}

/** A piece of a streamed reply: content to show, or a finished tool call. */
export type ToolStreamEvent = { content: string } | { call: ParsedToolCall };

/**
 * Splits a streamed reply into content and tool calls as it arrives. Content is released at once except
 * the part that may be the start of a `<tool_call>` block (held until it is one or cannot be) and the
 * blocks themselves (held until they close, then sent as one call; a malformed block goes out as content).
 * Leading and trailing whitespace is held the way parseToolCalls trims it, so the content pieces
 * concatenate to parseToolCalls(text).content.
 */
export class ToolCallStream {
  private buf = "";
  private started = false;
  private trailing = "";
  calls = 0;
  invalid = 0;

  /** Takes the next piece of text and returns what can be released. */
  push(text: string): ToolStreamEvent[] {
    this.buf += text;
    const out: ToolStreamEvent[] = [];
    for (;;) {
      const open = this.buf.indexOf(OPEN);
      if (open < 0) {
        const keep = heldTail(this.buf);
        this.content(this.buf.slice(0, this.buf.length - keep), out);
        this.buf = this.buf.slice(this.buf.length - keep);
        return out;
      }
      this.content(this.buf.slice(0, open), out);
      this.buf = this.buf.slice(open);
      const close = this.buf.indexOf(CLOSE);
      if (close < 0) return out;
      const block = this.buf.slice(0, close + CLOSE.length);
      this.buf = this.buf.slice(block.length);
      const parsed = parseToolCalls(block);
      if (parsed.calls.length) {
        this.calls++;
        out.push({ call: parsed.calls[0] });
      } else {
        this.invalid++;
        this.content(block, out);
      }
    }
  }

  /** The end of the reply: whatever was held is content (an unclosed block stays text, as parseToolCalls leaves it). */
  end(): ToolStreamEvent[] {
    const out: ToolStreamEvent[] = [];
    this.content(this.buf, out);
    this.buf = "";
    return out;
  }

  private content(piece: string, out: ToolStreamEvent[]): void {
    if (!this.started) {
      piece = piece.trimStart();
      if (!piece) return;
      this.started = true;
    }
    const text = this.trailing + piece;
    const body = text.trimEnd();
    this.trailing = text.slice(body.length);
    if (body) out.push({ content: body });
  }
}

/** How many characters at the end of `text` may begin a `<tool_call>` tag. */
function heldTail(text: string): number {
  for (let n = Math.min(OPEN.length - 1, text.length); n > 0; n--) if (OPEN.startsWith(text.slice(-n))) return n;
  return 0;
}

/** The opening a forced tool_choice writes into the assistant turn; guided decoding writes the call's JSON after it. */
export const GUIDED_CALL_PREFILL = `${OPEN}\n`;

/** An offered function: its name and the JSON Schema of its arguments (an empty object schema when none). */
export interface ToolSchema {
  name: string;
  parameters: unknown;
  strict?: boolean;
}

/** The offered functions of OpenAI-style `tools` (entries already checked to be functions with names). */
export function toolSchemas(tools: unknown[]): ToolSchema[] {
  return tools.map((t) => {
    const f = (t as { function: { name: string; parameters?: unknown; strict?: unknown } }).function;
    return { name: f.name, parameters: f.parameters ?? { type: "object", properties: {} }, strict: f.strict === true };
  });
}

/**
 * The JSON Schema of a hermes call body `{"name": ..., "arguments": {...}}` to one of `tools` (to `name`
 * alone when given): what guided decoding holds a forced call to.
 */
export function toolCallSchema(tools: ToolSchema[], name?: string): Record<string, unknown> {
  const one = (t: ToolSchema) => ({ type: "object", properties: { name: { const: t.name }, arguments: t.parameters }, required: ["name", "arguments"], additionalProperties: false });
  const chosen = name === undefined ? tools : tools.filter((t) => t.name === name);
  return chosen.length === 1 ? one(chosen[0]) : { anyOf: chosen.map(one) };
}
