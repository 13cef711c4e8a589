/**
 * What a query's clauses say, read from the kit's SQL lexer (lib/db/sqltext.ts): whether a gold query
 * orders its result (an ORDER BY at depth 0 of the outermost statement, never one inside a subquery, CTE
 * body, window or aggregate call), which output columns that ORDER BY sorts on, and the query with its
 * DISTINCT keywords removed.
 */

import { codeTokens, isPunct, isWord, tokenize, type Token } from "../db/sqltext.js";

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
  /** Expression tokens (a quoted identifier's text is its name without the quotes). */
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
    if (cur.length > 0) terms.push(makeTerm(sql, cur));
    cur = [];
  };
  for (let i = pos[pos.length - 1] + 2; i < toks.length; i++) {
    const t = toks[i];
    if (t.depth === 0 && t.type === "word" && TERM_END.has(t.text.toUpperCase())) break;
    if (t.depth === 0 && t.type === "punct" && t.text === ";") break;
    if (t.depth === 0 && t.type === "punct" && t.text === ",") flush();
    else cur.push(t);
  }
  flush();
  return terms;
}

function makeTerm(sql: string, toks: Token[]): OrderTerm {
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
  return { expr: parts.map((t) => sql.slice(t.start, t.end)).join("").toLowerCase(), parts, desc, nullsFirst, collate };
}

/**
 * Maps an ORDER BY term to the 0-based output column it sorts on, or -1 when that cannot be told from the
 * output alone (an expression that is not an output column, an ambiguous name, a collation).
 */
export function resolveOrderColumn(term: OrderTerm, columns: string[]): number {
  if (term.collate || term.parts.length === 0) return -1;
  const p = term.parts;
  if (p.length === 1 && p[0].type === "number" && /^\d+$/.test(p[0].text)) {
    const k = Number(p[0].text) - 1;
    return k >= 0 && k < columns.length ? k : -1;
  }
  const lower = columns.map((c) => c.toLowerCase());
  const unique = (name: string) => {
    const hits = lower.flatMap((c, i) => (c === name ? [i] : []));
    return hits.length === 1 ? hits[0] : -1;
  };
  const isName = (t: Token) => t.type === "word" || t.type === "quoted";
  if (p.length === 1 && isName(p[0])) return unique(p[0].text.toLowerCase());
  if (p.length === 3 && isName(p[0]) && isPunct(p[1], ".") && isName(p[2])) return unique(p[2].text.toLowerCase());
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
  let last = 0;
  for (const t of tokenize(sql)) {
    if (!isWord(t, "DISTINCT")) continue;
    out += sql.slice(last, t.start) + " ";
    last = t.end;
  }
  return out + sql.slice(last);
}
