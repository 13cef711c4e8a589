/**
 * Guided decoding: a grammar turned into a mask of the tokens allowed next, applied before sampling, so a
 * reply can only be text the grammar accepts (JSON, JSON matching a schema, a tool call of an offered
 * tool). The grammar engine is XGrammar, vLLM's default backend, in its WASM build
 * (@mlc-ai/web-xgrammar): measured in Node 20 at vocabularies of 4k-152k tokens (docs/model.md).
 *
 * Nothing of XGrammar runs on the caller's thread. A guide is first checked here against the limits
 * (guided-schema.ts: size, nesting, references), then compiled once in a sandbox worker under a time
 * limit, and its matchers run in a host worker (guided-pool.ts says why two). The engine's thread only
 * receives each token's mask and sends back the token sampled under it. Verdicts are cached by the guide,
 * so a guide already proven costs no sandbox compile again.
 */
import { T2sError } from "../core/errors.js";
import type { TokenConstraint } from "./engine/types.js";
import { GrammarPool, type GrammarVocab, type Verdict } from "./guided-pool.js";
import { checkSchemas, GUIDED_LIMITS, limitError, type GuidedLimits } from "./guided-schema.js";
import type { ChatTokenizer } from "./tokenizer.js";

export { GUIDED_LIMITS, type GuidedLimits } from "./guided-schema.js";

/** What a reply must be. */
export type Guide =
  | { kind: "json" }
  | { kind: "schema"; schema: unknown }
  /** free text until a `<tool_call>`, then a call to one of the tools, each argument object per its schema. */
  | { kind: "tool_tags"; tools: { name: string; parameters: unknown }[]; begin: string; end: string };

/** Sandbox verdicts kept, by guide (a hostile guide sent again is refused without another compile). */
const VERDICTS_KEPT = 256;

interface Guided {
  pool: GrammarPool;
  verdicts: Map<string, Promise<void>>;
}

const pools = new WeakMap<ChatTokenizer, Map<number, Guided>>();
const limitsOf = new WeakMap<ChatTokenizer, GuidedLimits>();

/** Sets the limits guides for this tokenizer's models are held to (a server's flags); the defaults otherwise. */
export function setGuidedLimits(tok: ChatTokenizer, limits: Partial<GuidedLimits>): void {
  limitsOf.set(tok, { ...GUIDED_LIMITS, ...limits });
}

/** The limits in force for a tokenizer's guides. */
export function guidedLimits(tok: ChatTokenizer): GuidedLimits {
  return limitsOf.get(tok) ?? GUIDED_LIMITS;
}

/** The tokenizer's vocabulary as XGrammar reads it (raw token strings and how they encode bytes). */
function vocabOf(tok: ChatTokenizer, vocabSize: number): GrammarVocab {
  const raw = tok.rawVocab?.();
  let tokens: string[];
  let type: string = "raw";
  if (raw) {
    tokens = raw.tokens.slice(0, vocabSize);
    while (tokens.length < vocabSize) tokens.push("");
    type = raw.type;
  } else {
    // no raw vocabulary: the decoded text of each id, as literal strings
    tokens = Array.from({ length: vocabSize }, (_, id) => (id < tok.vocabSize ? tok.decode([id], { skipSpecialTokens: false }) : ""));
  }
  return { tokens, type, vocabSize, eosIds: tok.eosIds };
}

function guidedFor(tok: ChatTokenizer, vocabSize: number): Guided {
  let byVocab = pools.get(tok);
  if (!byVocab) pools.set(tok, (byVocab = new Map()));
  let g = byVocab.get(vocabSize);
  if (!g) byVocab.set(vocabSize, (g = { pool: new GrammarPool(vocabOf(tok, vocabSize)), verdicts: new Map() }));
  return g;
}

/** The schemas a guide holds, named as an error would name them. */
function schemasOf(guide: Guide): { schema: unknown; at: string }[] {
  if (guide.kind === "schema") return [{ schema: guide.schema, at: "schema" }];
  if (guide.kind === "tool_tags") return guide.tools.map((t) => ({ schema: t.parameters, at: `${t.name}.parameters` }));
  return [];
}

/** Whether the matcher ends the sequence when its grammar completes (tool tags run until the end token). */
function terminatesAtEnd(guide: Guide): boolean {
  return guide.kind !== "tool_tags";
}

/**
 * Throws unless the guide is usable: a `usage` error for a schema the grammar engine must not or cannot
 * take, `guided_limit` for one past a limit (each names its limit). The sandbox's verdict is cached.
 */
export async function checkGuide(tok: ChatTokenizer, vocabSize: number, guide: Guide, opts: { signal?: AbortSignal } = {}): Promise<void> {
  const limits = guidedLimits(tok);
  checkSchemas(schemasOf(guide), limits);
  const g = guidedFor(tok, vocabSize);
  const key = JSON.stringify(guide);
  let verdict = g.verdicts.get(key);
  if (verdict) {
    g.verdicts.delete(key);
  } else {
    verdict = g.pool.check(guide, terminatesAtEnd(guide), limits.compileTimeoutMs, opts.signal).then((v) => {
      if (v.ok) return;
      // named, not narrowed: tslab's compiler (no strictNullChecks) does not narrow on `ok`
      const failed = v as Extract<Verdict, { ok: false }>;
      if (failed.reason === "timeout") throw limitError("compileTimeoutMs", `the schema's grammar did not compile within ${limits.compileTimeoutMs} ms`);
      if (failed.reason === "no_first_token") throw new T2sError("usage", "the schema cannot be used for guided decoding: no document satisfies it (its grammar allows no first token)");
      throw new T2sError("usage", `the schema cannot be used for guided decoding: the grammar engine failed on it (${failed.message})`);
    });
    // a check skipped because its request left, or an engine that did not start, decides nothing
    verdict.catch((e) => {
      if (e instanceof T2sError && (e.code === "cancelled" || e.code === "guided_unavailable")) g.verdicts.delete(key);
    });
  }
  g.verdicts.set(key, verdict);
  if (g.verdicts.size > VERDICTS_KEPT) g.verdicts.delete(g.verdicts.keys().next().value as string);
  await verdict;
}

/**
 * A fresh matcher of the guide for one sequence: `nextMask` is the bitmask of the tokens allowed next,
 * `accept` advances it by a sampled token (answered by the host worker, with the next mask), and
 * `finished` says the grammar is complete (the sequence ends there, with no end token needed).
 */
export async function guideConstraint(tok: ChatTokenizer, vocabSize: number, guide: Guide): Promise<TokenConstraint> {
  await checkGuide(tok, vocabSize, guide);
  const matcher = await guidedFor(tok, vocabSize).pool.open(JSON.stringify(guide), guide, terminatesAtEnd(guide));
  let disposed = false;
  const closeAt = guide.kind === "tool_tags" ? 0 : closingTokens(guide.kind === "schema" ? guide.schema : {});
  const closers = closerIds(tok);
  const words = Math.ceil(vocabSize / 32);
  const allowed = (id: number) => matcher.mask !== null && ((matcher.mask[id >> 5] >>> (id & 31)) & 1) === 1;
  return {
    nextMask: async (remaining: number) => {
      const mask = matcher.mask;
      // an empty mask would let the sampler pick token 0: the grammar has no way on from here
      if (!mask || !mask.some((w) => w !== 0)) throw new T2sError("guided_decoding", "the schema allows no token at this point of the reply (no document satisfies it from here)");
      if (remaining > closeAt) return mask;
      // the budget is nearly spent: the allowed token that ends the text soonest, so the reply still parses
      for (const id of closers) {
        if (!allowed(id)) continue;
        const only = new Int32Array(words);
        only[id >> 5] = 1 << (id & 31);
        return only;
      }
      return mask;
    },
    // a token outside the mask is refused here, without a round trip
    accept: (id: number) => (disposed || !allowed(id) ? false : matcher.advance(id)),
    finished: () => !disposed && matcher.terminated,
    dispose: () => {
      if (disposed) return;
      disposed = true;
      matcher.close();
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
