/**
 * Finding the query a model committed to in its reply. The rules, in order:
 *  1. Reasoning is removed first: every `<think>...</think>` block; text before a lone `</think>` (chat
 *     templates open the block in the prompt); and everything after an unclosed `<think>`.
 *  2. The last closed `<solution>...</solution>` block wins; if it holds a fenced block, the last such
 *     fence inside it is taken, else its whole text (minus any words before the first SELECT/WITH when
 *     the text does not start with a statement keyword; a block of prose alone holds no SQL).
 *  3. Otherwise the last closed fenced block whose info string is empty, `sql` or `sqlite` (any case).
 *  4. Otherwise (fallback, on by default) the text from the first SELECT, or the first WITH that starts
 *     a common table expression (`WITH [RECURSIVE] name [(cols)] AS (`), up to the first `;` outside
 *     strings and comments that is not followed by another statement, or the end of the reply. A second
 *     statement stays part of the query, as it would in a fence: `SELECT 1; DELETE FROM t` gets the same
 *     verdict (unsafe) bare or fenced, while prose after the `;` is left out.
 * The query is then normalised: comments dropped, whitespace outside literals collapsed to one space,
 * trailing semicolons stripped. An empty result is "no SQL" (null).
 */
import { tokenize } from "../db/sqltext.js";

export interface ExtractOptions {
  /** Take the text from the first SELECT/WITH when no block is found (default true). */
  fallback?: boolean;
}

/** Returns the committed SQL of a model reply, normalised, or null when the reply holds none. */
export function extractSql(reply: string, opts: ExtractOptions = {}): string | null {
  const text = stripThinking(reply);
  const solution = lastSolution(text);
  if (solution !== null) {
    const inner = lastFence(solution, true);
    if (inner !== null) return normalizeSql(inner);
    const query = skipLeadingProse(solution);
    return query === null ? null : normalizeSql(query);
  }
  const fence = lastFence(text, false);
  if (fence !== null) return normalizeSql(fence);
  if (opts.fallback === false) return null;
  const start = fallbackStart(text);
  if (start < 0) return null;
  return normalizeSql(untilSemicolon(text.slice(start)));
}

/** Returns the reply with reasoning blocks removed (see the module comment for the rules). */
export function stripThinking(reply: string): string {
  let text = reply.replace(/<think(?:ing)?>[\s\S]*?<\/think(?:ing)?>/gi, " ");
  const close = text.search(/<\/think(?:ing)?>(?![\s\S]*<\/think(?:ing)?>)/i);
  if (close >= 0) text = text.slice(text.indexOf(">", close) + 1);
  const open = text.search(/<think(?:ing)?>/i);
  if (open >= 0) text = text.slice(0, open);
  return text;
}

function lastSolution(text: string): string | null {
  const re = /<solution>([\s\S]*?)<\/solution>/gi;
  let last: string | null = null;
  for (let m = re.exec(text); m; m = re.exec(text)) last = m[1];
  return last;
}

const SQL_INFO = /^(sql|sqlite|sqlite3)?$/i;

/**
 * The body of the last closed ``` fence whose info string is empty or names SQL (any info string when
 * `anyLanguage`), or null. Fences pair up in order of appearance.
 */
function lastFence(text: string, anyLanguage: boolean): string | null {
  const parts = text.split("```");
  let last: string | null = null;
  // parts[1], parts[3], ... are fence bodies; an odd count of ``` leaves the final body unclosed
  for (let i = 1; i + 1 < parts.length; i += 2) {
    const body = parts[i];
    const nl = body.indexOf("\n");
    const firstLine = (nl < 0 ? body : body.slice(0, nl)).trim();
    let info = "";
    let code = body;
    if (nl >= 0 && /^[A-Za-z][\w+.-]*$/.test(firstLine) && !/^(select|with)$/i.test(firstLine)) {
      info = firstLine;
      code = body.slice(nl + 1);
    } else if (nl < 0 && /^(sql|sqlite)\s/i.test(body.trimStart())) {
      // inline form: ```sql SELECT 1```
      const t = body.trimStart();
      info = t.slice(0, t.search(/\s/));
      code = t.slice(info.length);
    }
    if (anyLanguage || SQL_INFO.test(info)) last = code;
  }
  return last;
}

const STATEMENT_START = /^\s*(\(|select|with|values|insert|update|delete|replace|create|drop|alter|pragma|attach|detach|vacuum|reindex|analyze|begin|commit|rollback|savepoint|release|explain)\b/i;

/**
 * Drops words before the query in a solution block ("The answer is SELECT ..."); null when the block
 * neither starts with a statement keyword nor holds a SELECT/WITH (prose only: no SQL).
 */
function skipLeadingProse(text: string): string | null {
  if (STATEMENT_START.test(text)) return text;
  const start = fallbackStart(text);
  return start < 0 ? null : text.slice(start);
}

/** Index of the first SELECT word or CTE-opening WITH, or -1. */
function fallbackStart(text: string): number {
  const sel = text.search(/\bselect\b/i);
  const withRe = /\bwith\s+(?:recursive\s+)?(?:[A-Za-z_][\w$]*|"[^"]+"|`[^`]+`|\[[^\]]+\])\s*(?:\([^()]*\)\s*)?as\s*(?:(?:not\s+)?materialized\s*)?\(/i;
  const w = text.search(withRe);
  if (sel < 0) return w;
  if (w < 0) return sel;
  return Math.min(sel, w);
}

const STATEMENT_KEYWORD = /^(select|values|insert|update|delete|replace|create|drop|alter|pragma|attach|detach|vacuum|reindex|analyze|begin|commit|rollback|savepoint|release|explain)\b/i;

/** Whether `text` (after a `;`) opens another statement: a statement keyword, or a CTE-opening WITH. */
function startsStatement(text: string): boolean {
  const t = text.replace(/^(\s+|--[^\n]*(\n|$)|\/\*[\s\S]*?\*\/)*/, "");
  return STATEMENT_KEYWORD.test(t) || fallbackStart(t) === 0;
}

/** The text up to the first `;` that ends the statements (one not followed by another statement). */
function untilSemicolon(text: string): string {
  for (const t of tokenize(text)) {
    if (t.type === "punct" && t.text === ";" && !startsStatement(text.slice(t.end))) return text.slice(0, t.start);
  }
  return text;
}

/**
 * Returns `sql` with comments removed, whitespace outside string literals and quoted identifiers collapsed
 * to single spaces, and trailing semicolons stripped; null when nothing is left.
 */
export function normalizeSql(sql: string): string | null {
  let out = "";
  let pendingSpace = false;
  let last = 0;
  for (const t of tokenize(sql)) {
    // whitespace is what lies between two tokens
    if (t.start > last || t.type === "comment") pendingSpace = true;
    last = t.end;
    if (t.type === "comment") continue;
    if (pendingSpace && out.length > 0) out += " ";
    pendingSpace = false;
    out += sql.slice(t.start, t.end);
  }
  out = out.replace(/(\s*;)+\s*$/, "").trim();
  return out.length > 0 ? out : null;
}
