/**
 * A small SQL tokenizer, enough to tell code from string literals, quoted identifiers and comments, and to
 * track parenthesis depth. It decides whether a gold query orders its result (an ORDER BY at depth 0 of
 * the outermost statement, never one inside a subquery, CTE body, window or aggregate call) and which
 * output columns that ORDER BY sorts on.
 */

import { isDigit, isNumberPart, isWordPart, isWordStart } from "../db/sqltext.js";

export type TokenKind = "word" | "number" | "string" | "ident" | "punct" | "comment" | "space";

export interface Token {
  kind: TokenKind;
  text: string;
  /** Parenthesis depth the token sits at ("(" itself is at the outer depth). */
  depth: number;
}

/** `\s` as JavaScript reads it; the ASCII cases are decided without a regular expression. */
const UNICODE_SPACE = /\s/;
function isSpace(c: number): boolean {
  if (c < 128) return c === 32 || (c >= 9 && c <= 13);
  return UNICODE_SPACE.test(String.fromCharCode(c));
}

/**
 * Returns the tokens of `sql`; an unterminated string or comment runs to the end of the text. Characters
 * are read as code units (charCodeAt): it runs on every query the grader sees.
 */
export function tokenize(sql: string): Token[] {
  const out: Token[] = [];
  let depth = 0;
  let i = 0;
  const n = sql.length;
  const push = (kind: TokenKind, start: number, end: number, d = depth) => out.push({ kind, text: sql.slice(start, end), depth: d });
  while (i < n) {
    const c = sql.charCodeAt(i);
    const next = i + 1 < n ? sql.charCodeAt(i + 1) : -1;
    const start = i;
    if (isSpace(c)) {
      while (i < n && isSpace(sql.charCodeAt(i))) i++;
      push("space", start, i);
    } else if (c === 45 /* - */ && next === 45) {
      const nl = sql.indexOf("\n", i);
      i = nl < 0 ? n : nl;
      push("comment", start, i);
    } else if (c === 47 /* / */ && next === 42 /* * */) {
      const end = sql.indexOf("*/", i + 2);
      i = end < 0 ? n : end + 2;
      push("comment", start, i);
    } else if (c === 39 /* ' */ || c === 34 /* " */ || c === 96 /* ` */) {
      i = quotedEnd(sql, i, sql[i]);
      push(c === 39 ? "string" : "ident", start, i);
    } else if (c === 91 /* [ */) {
      const end = sql.indexOf("]", i + 1);
      i = end < 0 ? n : end + 1;
      push("ident", start, i);
    } else if (isDigit(c) || (c === 46 /* . */ && isDigit(next))) {
      while (i < n && isNumberPart(sql.charCodeAt(i))) {
        const d = sql.charCodeAt(i);
        const after = i + 1 < n ? sql.charCodeAt(i + 1) : -1;
        if ((d === 101 || d === 69) && (after === 43 || after === 45)) i++;
        i++;
      }
      push("number", start, i);
    } else if (isWordStart(c)) {
      while (i < n && isWordPart(sql.charCodeAt(i))) i++;
      push("word", start, i);
    } else if (c === 40 /* ( */) {
      i++;
      push("punct", start, i);
      depth++;
    } else if (c === 41 /* ) */) {
      i++;
      depth = Math.max(0, depth - 1);
      push("punct", start, i);
    } else {
      i++;
      push("punct", start, i);
    }
  }
  return out;
}

/** Index just past the closing quote; a doubled quote inside is an escaped quote. */
function quotedEnd(sql: string, i: number, q: string): number {
  let j = i + 1;
  while (j < sql.length) {
    if (sql[j] === q) {
      if (sql[j + 1] === q) j += 2;
      else return j + 1;
    } else j++;
  }
  return sql.length;
}

const CODE_TOKEN_MEMO = 512;
const codeTokenMemo = new Map<string, readonly Token[]>();

/**
 * Tokens that carry meaning (no whitespace, no comments). The last few hundred texts are remembered: the
 * grader asks about the same gold (its ORDER BY, its tie columns) at every grade. Callers must not change
 * the array they get.
 */
export function codeTokens(sql: string): Token[] {
  const hit = codeTokenMemo.get(sql);
  if (hit) return hit as Token[];
  const toks = tokenize(sql).filter((t) => t.kind !== "space" && t.kind !== "comment");
  codeTokenMemo.set(sql, toks);
  if (codeTokenMemo.size > CODE_TOKEN_MEMO) codeTokenMemo.delete(codeTokenMemo.keys().next().value as string);
  return toks;
}

function isWord(t: Token | undefined, w: string): boolean {
  return t !== undefined && t.kind === "word" && t.text.toUpperCase() === w;
}

/** Positions (in `codeTokens`) of each ORDER keyword followed by BY; `topLevel` keeps only depth 0. */
function orderByPositions(toks: Token[], topLevel: boolean): number[] {
  const out: number[] = [];
  for (let i = 0; i + 1 < toks.length; i++) {
    if (isWord(toks[i], "ORDER") && isWord(toks[i + 1], "BY") && (!topLevel || toks[i].depth === 0)) out.push(i);
  }
  return out;
}

/** Answers of hasTopLevelOrderBy per text: asked of each gold at every grade, and a gold's tokens may have
 * left the (smaller) token memo when a task set has thousands of golds. */
const TOP_LEVEL_MEMO = 8192;
const topLevelMemo = new Map<string, boolean>();

/** True when the statement's outermost query has an ORDER BY (not one inside parentheses). */
export function hasTopLevelOrderBy(sql: string): boolean {
  const hit = topLevelMemo.get(sql);
  if (hit !== undefined) return hit;
  const yes = orderByPositions(codeTokens(sql), true).length > 0;
  topLevelMemo.set(sql, yes);
  if (topLevelMemo.size > TOP_LEVEL_MEMO) topLevelMemo.delete(topLevelMemo.keys().next().value as string);
  return yes;
}

/** True when ORDER BY appears anywhere outside strings and comments (Spider's rule, token-based). */
export function hasOrderByAnywhere(sql: string): boolean {
  return orderByPositions(codeTokens(sql), false).length > 0;
}

/** One term of a top-level ORDER BY. */
export interface OrderTerm {
  /** The expression text with whitespace removed, e.g. "t.price", "count(*)", "2". */
  expr: string;
  /** Expression tokens (identifier parts unquoted). */
  parts: Token[];
  desc: boolean;
  /** Explicit NULLS FIRST (true) / NULLS LAST (false); undefined for SQLite's default. */
  nullsFirst?: boolean;
  /** The term names a collation (its ties cannot be judged from values alone). */
  collate: boolean;
}

const TERM_END = new Set(["LIMIT", "OFFSET"]);

/** The terms of the last top-level ORDER BY of `sql`, or null when there is none. */
export function topLevelOrderTerms(sql: string): OrderTerm[] | null {
  const toks = codeTokens(sql);
  const pos = orderByPositions(toks, true);
  if (pos.length === 0) return null;
  const terms: OrderTerm[] = [];
  let cur: Token[] = [];
  const flush = () => {
    if (cur.length > 0) terms.push(makeTerm(cur));
    cur = [];
  };
  for (let i = pos[pos.length - 1] + 2; i < toks.length; i++) {
    const t = toks[i];
    if (t.depth === 0 && t.kind === "word" && TERM_END.has(t.text.toUpperCase())) break;
    if (t.depth === 0 && t.kind === "punct" && t.text === ";") break;
    if (t.depth === 0 && t.kind === "punct" && t.text === ",") flush();
    else cur.push(t);
  }
  flush();
  return terms;
}

function makeTerm(toks: Token[]): OrderTerm {
  let end = toks.length;
  let desc = false;
  let nullsFirst: boolean | undefined;
  let collate = false;
  // peel modifiers off the end: NULLS FIRST|LAST, ASC|DESC, COLLATE name
  for (;;) {
    const last = toks[end - 1];
    const prev = toks[end - 2];
    if (end >= 2 && isWord(prev, "NULLS") && (isWord(last, "FIRST") || isWord(last, "LAST"))) {
      nullsFirst = isWord(last, "FIRST");
      end -= 2;
    } else if (end >= 1 && (isWord(last, "ASC") || isWord(last, "DESC"))) {
      desc = isWord(last, "DESC");
      end -= 1;
    } else if (end >= 2 && isWord(prev, "COLLATE")) {
      collate = true;
      end -= 2;
    } else break;
  }
  const parts = toks.slice(0, end);
  return { expr: parts.map((t) => t.text).join("").toLowerCase(), parts, desc, nullsFirst, collate };
}

/** An identifier's name without its quotes. */
export function unquote(text: string): string {
  const q = text[0];
  if (q === '"' || q === "`") return text.slice(1, -1).split(q + q).join(q);
  if (q === "[") return text.slice(1, -1);
  return text;
}

/**
 * Maps an ORDER BY term to the 0-based output column it sorts on, or -1 when that cannot be told from the
 * output alone (an expression that is not an output column, an ambiguous name, a collation).
 */
export function resolveOrderColumn(term: OrderTerm, columns: string[]): number {
  if (term.collate || term.parts.length === 0) return -1;
  const p = term.parts;
  if (p.length === 1 && p[0].kind === "number" && /^\d+$/.test(p[0].text)) {
    const k = Number(p[0].text) - 1;
    return k >= 0 && k < columns.length ? k : -1;
  }
  const lower = columns.map((c) => c.toLowerCase());
  const unique = (name: string) => {
    const hits = lower.flatMap((c, i) => (c === name ? [i] : []));
    return hits.length === 1 ? hits[0] : -1;
  };
  const isName = (t: Token) => t.kind === "word" || t.kind === "ident";
  if (p.length === 1 && isName(p[0])) return unique(unquote(p[0].text).toLowerCase());
  if (p.length === 3 && isName(p[0]) && p[1].text === "." && isName(p[2])) return unique(unquote(p[2].text).toLowerCase());
  // SQLite names an unaliased expression column by its source text, e.g. "COUNT(*)"
  const squashed = lower.map((c) => c.replace(/\s+/g, ""));
  const hits = squashed.flatMap((c, i) => (c === term.expr ? [i] : []));
  return hits.length === 1 ? hits[0] : -1;
}

/**
 * `sql` with every DISTINCT keyword removed (SELECT DISTINCT, COUNT(DISTINCT x), ...), as Spider's
 * evaluator removes it from both queries by default; strings, quoted names and comments are left alone.
 */
export function removeDistinct(sql: string): string {
  let out = "";
  for (const t of tokenize(sql)) out += t.kind === "word" && t.text.toUpperCase() === "DISTINCT" ? " " : t.text;
  return out;
}
