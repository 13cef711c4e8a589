/**
 * tokenizer.json + the chat template of a Hugging Face model folder. Token ids come from
 * @huggingface/tokenizers; the template (from tokenizer_config.json's `chat_template`, or
 * chat_template.jinja / chat_template.json beside it) is rendered with @huggingface/jinja the way
 * transformers' apply_chat_template does, tools included.
 */
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { Tokenizer } from "@huggingface/tokenizers";
import { Template } from "@huggingface/jinja";
import { T2sError } from "../core/errors.js";

/** A chat message as templates expect it (OpenAI shape; tool call arguments may be objects or JSON text). */
export interface TemplateMessage {
  role: string;
  content: string | null;
  tool_calls?: unknown[];
  tool_call_id?: string;
  name?: string;
}

export interface ChatTokenizer {
  /** Token ids of a text; special tokens written in the text are recognised. */
  encode(text: string, opts?: { addSpecialTokens?: boolean }): number[];
  decode(ids: number[], opts?: { skipSpecialTokens?: boolean }): string;
  /** The prompt text for a conversation (with the assistant header when addGenerationPrompt, default true). */
  applyChatTemplate(messages: TemplateMessage[], opts?: { tools?: unknown[]; addGenerationPrompt?: boolean; extra?: Record<string, unknown> }): string;
  /** Ids that end a generation (the tokenizer's eos token plus the model's eos ids). */
  readonly eosIds: number[];
  readonly padId: number | null;
  readonly vocabSize: number;
  /** Whether the folder has a chat template. */
  readonly hasChatTemplate: boolean;
  /** The vocabulary as stored in tokenizer.json (by id) and how its strings encode bytes: guided decoding's input. */
  rawVocab?(): { tokens: string[]; type: "byte_level" | "byte_fallback" | "raw" };
}

function readJson(file: string): Record<string, unknown> {
  try {
    return JSON.parse(readFileSync(file, "utf8"));
  } catch (e) {
    throw new T2sError("bad_tokenizer", `${file}: not valid JSON (${(e as Error).message})`);
  }
}

function tokenText(v: unknown): string | null {
  if (typeof v === "string") return v;
  if (v && typeof v === "object" && typeof (v as { content?: unknown }).content === "string") return (v as { content: string }).content;
  return null;
}

function findTemplate(dir: string, cfg: Record<string, unknown>): string | null {
  const jinja = join(dir, "chat_template.jinja");
  if (existsSync(jinja)) return readFileSync(jinja, "utf8");
  let t: unknown = cfg.chat_template;
  const json = join(dir, "chat_template.json");
  if (t === undefined && existsSync(json)) t = readJson(json).chat_template;
  if (typeof t === "string") return t;
  if (Array.isArray(t)) {
    const named = t as { name: string; template: string }[];
    return (named.find((x) => x.name === "default") ?? named[0])?.template ?? null;
  }
  return null;
}

/** Returns the tokenizer and chat template of a model folder; `extraEos` adds the model config's eos ids. */
export function loadTokenizer(dir: string, extraEos: number[] = []): ChatTokenizer {
  const tokFile = join(dir, "tokenizer.json");
  if (!existsSync(tokFile)) throw new T2sError("missing_file", `${dir} has no tokenizer.json`);
  const cfgFile = join(dir, "tokenizer_config.json");
  const cfg = existsSync(cfgFile) ? readJson(cfgFile) : {};
  const tokJson = readJson(tokFile);
  let tok: Tokenizer;
  try {
    tok = new Tokenizer(tokJson, cfg);
  } catch (e) {
    throw new T2sError("bad_tokenizer", `${tokFile}: cannot build the tokenizer (${(e as Error).message})`);
  }
  const source = findTemplate(dir, cfg);
  let template: Template | null = null;
  if (source !== null) {
    try {
      template = new Template(source);
    } catch (e) {
      throw new T2sError("bad_tokenizer", `${dir}: the chat template does not parse (${(e as Error).message})`);
    }
  }
  const special: Record<string, string | null> = {};
  for (const k of ["bos_token", "eos_token", "pad_token", "unk_token"]) special[k] = tokenText(cfg[k]);
  const idOf = (t: string | null) => (t === null ? undefined : tok.token_to_id(t));
  const eos = new Set<number>(extraEos);
  const eosId = idOf(special.eos_token);
  if (eosId !== undefined) eos.add(eosId);
  const genCfg = join(dir, "generation_config.json");
  if (existsSync(genCfg)) {
    const g = readJson(genCfg).eos_token_id;
    for (const id of Array.isArray(g) ? g : [g]) if (typeof id === "number") eos.add(id);
  }
  const padId = idOf(special.pad_token) ?? null;
  const vocabSize = tok.get_vocab(true).size;
  return {
    encode: (text, opts = {}) => tok.encode(text, { add_special_tokens: opts.addSpecialTokens ?? true }).ids,
    decode: (ids, opts = {}) => (ids.length ? tok.decode(ids, { skip_special_tokens: opts.skipSpecialTokens ?? false }) : ""),
    applyChatTemplate(messages, opts = {}) {
      if (!template) throw new T2sError("no_chat_template", `${dir} has no chat template (tokenizer_config.json chat_template or chat_template.jinja)`);
      // extra variables first (vLLM's chat_template_kwargs), so they never replace the messages or the tokens
      const ctx: Record<string, unknown> = {
        ...opts.extra,
        messages,
        add_generation_prompt: opts.addGenerationPrompt ?? true,
        ...special,
      };
      if (opts.tools && opts.tools.length) ctx.tools = opts.tools;
      try {
        return template.render(ctx);
      } catch (e) {
        throw new T2sError("chat_template_failed", `${dir}: rendering the chat template failed: ${(e as Error).message}`);
      }
    },
    rawVocab: () => rawVocab(tokJson, vocabSize),
    eosIds: [...eos].sort((a, b) => a - b),
    padId,
    vocabSize,
    hasChatTemplate: template !== null,
  };
}

/** tokenizer.json's tokens by id (model vocabulary and added tokens) and their byte encoding. */
function rawVocab(json: Record<string, unknown>, size: number): { tokens: string[]; type: "byte_level" | "byte_fallback" | "raw" } {
  const tokens = new Array<string>(size).fill("");
  const model = (json.model ?? {}) as { vocab?: unknown; byte_fallback?: boolean };
  if (Array.isArray(model.vocab)) (model.vocab as [string, number][]).forEach(([t], i) => i < size && (tokens[i] = t));
  else if (model.vocab && typeof model.vocab === "object") for (const [t, i] of Object.entries(model.vocab as Record<string, number>)) if (i < size) tokens[i] = t;
  for (const a of (json.added_tokens ?? []) as { id: number; content: string }[]) if (a.id < size) tokens[a.id] = a.content;
  const decoder = JSON.stringify(json.decoder ?? null);
  const type = decoder.includes('"ByteLevel"') ? "byte_level" : model.byte_fallback || decoder.includes('"ByteFallback"') ? "byte_fallback" : "raw";
  return { tokens, type };
}
