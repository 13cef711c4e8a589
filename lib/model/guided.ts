/**
 * Guided decoding: a grammar turned into a mask of the tokens allowed next, applied before sampling, so a
 * reply can only be text the grammar accepts (JSON, JSON matching a schema, a tool call of an offered
 * tool). The grammar engine is XGrammar, vLLM's default backend, in its WASM build
 * (@mlc-ai/web-xgrammar): measured in Node 20 at vocabularies of 4k-152k tokens (docs/model.md).
 *
 * Its package is a UMD file inside a `"type": "module"` package, which Node's ESM loader cannot run (it
 * reads `require` and `__filename`); it is loaded here as the CommonJS script it is, through node:vm.
 * Compiled grammars are cached by their source (a schema compiles in 0.1-0.6 s), a tokenizer's vocabulary
 * once per tokenizer.
 */
import { readFileSync } from "node:fs";
import { createRequire } from "node:module";
import { dirname } from "node:path";
import { constants as vmConstants, runInThisContext } from "node:vm";
import { T2sError } from "../core/errors.js";
import { kitPath } from "../core/paths.js";
import type { TokenConstraint } from "./engine/types.js";
import type { ChatTokenizer } from "./tokenizer.js";

/* eslint-disable @typescript-eslint/no-explicit-any */
type Xgr = any;

let loaded: Xgr | null = null;

/** The XGrammar module (loaded on first use). */
function xgrammar(): Xgr {
  if (loaded) return loaded;
  const req = createRequire(kitPath("package.json"));
  const file = req.resolve("@mlc-ai/web-xgrammar");
  const wrapped = runInThisContext(`(function (exports, require, module, __filename, __dirname) {${readFileSync(file, "utf8")}\n})`, { filename: file, importModuleDynamically: vmConstants.USE_MAIN_CONTEXT_DEFAULT_LOADER }) as (...a: unknown[]) => void;
  const module = { exports: {} as Record<string, unknown> };
  wrapped(module.exports, createRequire(file), module, file, dirname(file));
  loaded = module.exports;
  return loaded;
}

/** What a reply must be. */
export type Guide =
  | { kind: "json" }
  | { kind: "schema"; schema: unknown }
  /** free text until a `<tool_call>`, then a call to one of the tools, each argument object per its schema. */
  | { kind: "tool_tags"; tools: { name: string; parameters: unknown }[]; begin: string; end: string };

interface Compiler {
  info: Xgr;
  compiler: Xgr;
  grammars: Map<string, Promise<Xgr>>;
}

const compilers = new WeakMap<ChatTokenizer, Promise<Compiler>>();
const GRAMMARS_KEPT = 64;

/** The tokenizer's vocabulary as XGrammar reads it (raw token strings and how they encode bytes). */
function vocabOf(tok: ChatTokenizer, vocabSize: number): { tokens: string[]; type: string } {
  const raw = tok.rawVocab?.();
  if (raw) {
    const tokens = raw.tokens.slice(0, vocabSize);
    while (tokens.length < vocabSize) tokens.push("");
    return { tokens, type: raw.type };
  }
  // no raw vocabulary: the decoded text of each id, as literal strings
  return { tokens: Array.from({ length: vocabSize }, (_, id) => (id < tok.vocabSize ? tok.decode([id], { skipSpecialTokens: false }) : "")), type: "raw" };
}

function compilerFor(tok: ChatTokenizer, vocabSize: number): Promise<Compiler> {
  let c = compilers.get(tok);
  if (!c) {
    c = (async () => {
      const x = xgrammar();
      const { tokens, type } = vocabOf(tok, vocabSize);
      const info = await x.TokenizerInfo.createTokenizerInfo(tokens, type, false, vocabSize, tok.eosIds);
      const compiler = await x.GrammarCompiler.createGrammarCompiler(info, true);
      return { info, compiler, grammars: new Map() };
    })();
    compilers.set(tok, c);
  }
  return c;
}

function compile(c: Compiler, guide: Guide): Promise<Xgr> {
  const key = JSON.stringify(guide);
  let g = c.grammars.get(key);
  if (g) {
    c.grammars.delete(key);
    c.grammars.set(key, g);
    return g;
  }
  // compact JSON (", " and ": " separators, no free whitespace): whitespace is no place for a reply to wander
  if (guide.kind === "json") g = c.compiler.compileBuiltinJSONGrammar();
  else if (guide.kind === "schema") g = c.compiler.compileJSONSchema(JSON.stringify(guide.schema), false, -1, [", ", ": "], true);
  else {
    const tags = guide.tools.map((t) => ({ begin: `${guide.begin}{"name": ${JSON.stringify(t.name)}, "arguments": `, schema: t.parameters, end: `}${guide.end}` }));
    g = c.compiler.compileStructuralTag(tags.map((t) => new (xgrammar().StructuralTagItem)(t.begin, JSON.stringify(t.schema), t.end)), [guide.begin]);
  }
  const made = g as Promise<Xgr>;
  made.catch(() => c.grammars.delete(key));
  c.grammars.set(key, made);
  if (c.grammars.size > GRAMMARS_KEPT) c.grammars.delete(c.grammars.keys().next().value as string);
  return made;
}

/** Throws a usage error unless XGrammar compiles the guide (a bad schema is the client's to fix). */
export async function checkGuide(tok: ChatTokenizer, vocabSize: number, guide: Guide): Promise<void> {
  await compiledGuide(tok, vocabSize, guide);
}

const TYPES = new Set(["object", "array", "string", "number", "integer", "boolean", "null"]);

/** Schema problems found before XGrammar sees them (its converter aborts on some, printing to stderr). */
function schemaProblem(s: unknown, at: string, depth = 0): string | null {
  if (typeof s === "boolean") return null;
  if (!s || typeof s !== "object" || Array.isArray(s)) return `${at} is not a schema (an object)`;
  if (depth > 64) return `${at} nests too deep`;
  const o = s as Record<string, unknown>;
  const types = Array.isArray(o.type) ? o.type : o.type === undefined ? [] : [o.type];
  for (const t of types) if (typeof t !== "string" || !TYPES.has(t)) return `${at}.type ${JSON.stringify(t)} is not a JSON Schema type`;
  for (const key of ["properties", "$defs", "definitions", "patternProperties"]) {
    const v = o[key];
    if (v === undefined) continue;
    if (!v || typeof v !== "object" || Array.isArray(v)) return `${at}.${key} must be an object`;
    for (const [k, x] of Object.entries(v)) {
      const p = schemaProblem(x, `${at}.${key}.${k}`, depth + 1);
      if (p) return p;
    }
  }
  for (const key of ["items", "additionalProperties", "not", "contains"]) if (o[key] !== undefined) {
    const p = schemaProblem(o[key], `${at}.${key}`, depth + 1);
    if (p) return p;
  }
  for (const key of ["anyOf", "oneOf", "allOf", "prefixItems"]) if (o[key] !== undefined) {
    if (!Array.isArray(o[key])) return `${at}.${key} must be an array`;
    for (const [i, x] of (o[key] as unknown[]).entries()) {
      const p = schemaProblem(x, `${at}.${key}[${i}]`, depth + 1);
      if (p) return p;
    }
  }
  return null;
}

async function compiledGuide(tok: ChatTokenizer, vocabSize: number, guide: Guide): Promise<Xgr> {
  const problem = guide.kind === "schema" ? schemaProblem(guide.schema, "schema") : guide.kind === "tool_tags" ? guide.tools.map((t) => schemaProblem(t.parameters, `${t.name}.parameters`)).find((p) => p) ?? null : null;
  if (problem) throw new T2sError("usage", `the schema cannot be used for guided decoding: ${problem}`);
  const c = await compilerFor(tok, vocabSize);
  try {
    return await compile(c, guide);
  } catch (e) {
    throw new T2sError("usage", `the schema cannot be used for guided decoding: ${e instanceof Error ? e.message : String(e)}`);
  }
}

/**
 * A fresh matcher of the guide for one sequence: `nextMask` is the bitmask of the tokens allowed next,
 * `accept` advances it by a sampled token, and `finished` says the grammar is complete (the sequence ends
 * there, with no end token needed).
 */
export async function guideConstraint(tok: ChatTokenizer, vocabSize: number, guide: Guide): Promise<TokenConstraint> {
  const grammar = await compiledGuide(tok, vocabSize, guide);
  const x = xgrammar();
  const terminateAtEnd = guide.kind !== "tool_tags";
  const matcher = await x.GrammarMatcher.createGrammarMatcher(grammar, tok.eosIds, terminateAtEnd);
  let disposed = false;
  const closeAt = guide.kind === "tool_tags" ? 0 : closingTokens(guide.kind === "schema" ? guide.schema : {});
  const closers = closerIds(tok);
  const words = Math.ceil(vocabSize / 32);
  return {
    nextMask: async (remaining: number) => {
      const mask = (await matcher.getNextTokenBitmask()) as Int32Array;
      if (remaining > closeAt) return mask;
      // the budget is nearly spent: the allowed token that ends the text soonest, so the reply still parses
      for (const id of closers) {
        if (((mask[id >> 5] >>> (id & 31)) & 1) === 0) continue;
        const only = new Int32Array(words);
        only[id >> 5] = 1 << (id & 31);
        return only;
      }
      return mask;
    },
    accept: (id: number) => (disposed ? false : (matcher.acceptToken(id) as boolean)),
    finished: () => !disposed && (matcher.isTerminated() as boolean),
    dispose: () => {
      if (disposed) return;
      disposed = true;
      matcher.dispose();
    },
  };
}

/**
 * Tokens to keep for closing a reply of this schema: past that point of the budget, guided decoding takes
 * the allowed token that ends the text soonest (a closing quote, brace or bracket, a 0, the comma before a
 * required property) instead of sampling, so a reply cut by max_tokens is rare. The bound counts the
 * characters of the shortest document (required properties' names, consts and enums, minimal values), as
 * if every character took a token, plus a margin.
 */
export function closingTokens(schema: unknown): number {
  return Math.min(512, shortestChars(schema, 0) + 6);
}

function shortestChars(s: unknown, depth: number): number {
  if (!s || typeof s !== "object" || depth > 12) return 5;
  const o = s as Record<string, unknown>;
  if ("const" in o) return JSON.stringify(o.const ?? null).length;
  if (Array.isArray(o.enum)) return Math.max(1, ...o.enum.map((v) => JSON.stringify(v ?? null).length));
  for (const key of ["anyOf", "oneOf"]) if (Array.isArray(o[key])) return Math.max(1, ...(o[key] as unknown[]).map((x) => shortestChars(x, depth + 1)));
  if (o.properties && typeof o.properties === "object") {
    const props = o.properties as Record<string, unknown>;
    const required = Array.isArray(o.required) ? (o.required as string[]) : [];
    return 2 + required.reduce((n, k) => n + k.length + 6 + shortestChars(props[k], depth + 1), 0);
  }
  if (o.type === "array") return 2 + (typeof o.minItems === "number" ? o.minItems * (shortestChars(o.items, depth + 1) + 2) : 0);
  if (o.type === "string") return 2 + (typeof o.minLength === "number" ? o.minLength : 0);
  return 5;
}

const closerCache = new WeakMap<ChatTokenizer, number[]>();

/** Single-token ids of the texts that end JSON soonest, in the order they are preferred. */
function closerIds(tok: ChatTokenizer): number[] {
  let ids = closerCache.get(tok);
  if (!ids) {
    ids = [];
    for (const text of ['"', "}", "]", "0", ",", "false", "null", "a", "{", "["]) {
      const enc = tok.encode(text, { addSpecialTokens: false });
      if (enc.length === 1 && !ids.includes(enc[0])) ids.push(enc[0]);
    }
    closerCache.set(tok, ids);
  }
  return ids;
}
