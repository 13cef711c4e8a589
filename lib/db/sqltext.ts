/**
 * The kit's one SQL lexer. It is not a parser: it only splits text into tokens the way SQLite does
 * (strings, quoted identifiers, comments, blob literals, variables) and records each token's parenthesis
 * depth. The sandbox's policy check reads it so that the inside of a string or comment is never mistaken
 * for a keyword, schema.ts recovers DDL comments with it, and the verifier reads it to find a query's end,
 * normalize its whitespace, find its top-level ORDER BY and score its Spider hardness.
 */

export type TokenType = "word" | "quoted" | "string" | "blob" | "number" | "variable" | "punct" | "comment";

export interface Token {
  type: TokenType;
  /** The token as written (for `quoted`, the identifier without its quotes). */
  text: string;
  /** Offset of the first character in the source; `sql.slice(start, end)` is the token as written. */
  start: number;
  end: number;
  /** Parenthesis depth the token sits at ("(" and ")" themselves are at the outer depth). */
  depth: number;
}

// SQL character classes by UTF-16 code unit (charCodeAt): the lexer reads every query the sandbox and the
// grader see, and a regular expression per character costs more than the rest of the policy check.
/** [0-9] */
export const isDigit = (c: number) => c >= 48 && c <= 57;
const isLetter = (c: number) => (c >= 65 && c <= 90) || (c >= 97 && c <= 122);
/** [A-Za-z_\u0080-\uffff] */
export const isWordStart = (c: number) => isLetter(c) || c === 95 || c >= 128;
/** [A-Za-z0-9_$\u0080-\uffff] */
export const isWordPart = (c: number) => isWordStart(c) || isDigit(c) || c === 36;
/** [0-9A-Za-z_.]: the characters a numeric literal is read over. */
export const isNumberPart = (c: number) => isLetter(c) || isDigit(c) || c === 95 || c === 46;

/**
 * `\s` as JavaScript reads it, ASCII cases without a regular expression. A non-ASCII space (no-break,
 * ideographic, ...) where a token would start is whitespace, so that a reply's stray U+00A0 or U+3000
 * between words grades like a plain space; inside a word it stays a word character, as in SQLite.
 */
const UNICODE_SPACE = /\s/;
function isSpace(c: number): boolean {
  if (c < 128) return c === 32 || (c >= 9 && c <= 13);
  return UNICODE_SPACE.test(String.fromCharCode(c));
}

function closeQuoted(sql: string, i: number, close: string, doubled: boolean): { end: number; text: string } {
  const next = sql.indexOf(close, i + 1);
  // no doubled quote can follow: the text is one slice (the common case, without a string per character)
  if (next >= 0 && !(doubled && sql[next + 1] === close)) return { end: next + 1, text: sql.slice(i + 1, next) };
  let text = "";
  let j = i + 1;
  while (j < sql.length) {
    const c = sql[j];
    if (c === close) {
      if (doubled && sql[j + 1] === close) {
        text += close;
        j += 2;
        continue;
      }
      return { end: j + 1, text };
    }
    text += c;
    j++;
  }
  return { end: sql.length, text }; // unterminated: SQLite will report it when preparing
}

/**
 * Splits SQL text into tokens; comments are kept as `comment` tokens (text without the delimiters),
 * whitespace is dropped (it is what lies between one token's end and the next one's start). An
 * unterminated string, identifier or comment runs to the end of the text.
 */
export function tokenize(sql: string): Token[] {
  const out: Token[] = [];
  let depth = 0;
  let i = 0;
  while (i < sql.length) {
    const c = sql[i];
    if (isSpace(sql.charCodeAt(i))) {
      i++;
      continue;
    }
    const start = i;
    if (c === "-" && sql[i + 1] === "-") {
      const nl = sql.indexOf("\n", i);
      i = nl < 0 ? sql.length : nl;
      out.push({ type: "comment", text: sql.slice(start + 2, i), start, end: i, depth });
      continue;
    }
    if (c === "/" && sql[i + 1] === "*") {
      const close = sql.indexOf("*/", i + 2);
      i = close < 0 ? sql.length : close + 2;
      out.push({ type: "comment", text: sql.slice(start + 2, close < 0 ? sql.length : close), start, end: i, depth });
      continue;
    }
    if ((c === "x" || c === "X") && sql[i + 1] === "'") {
      const q = closeQuoted(sql, i + 1, "'", false);
      out.push({ type: "blob", text: sql.slice(start, q.end), start, end: q.end, depth });
      i = q.end;
      continue;
    }
    if (c === "'") {
      const q = closeQuoted(sql, i, "'", true);
      out.push({ type: "string", text: q.text, start, end: q.end, depth });
      i = q.end;
      continue;
    }
    if (c === '"' || c === "`") {
      const q = closeQuoted(sql, i, c, true);
      out.push({ type: "quoted", text: q.text, start, end: q.end, depth });
      i = q.end;
      continue;
    }
    if (c === "[") {
      const q = closeQuoted(sql, i, "]", false);
      out.push({ type: "quoted", text: q.text, start, end: q.end, depth });
      i = q.end;
      continue;
    }
    const code = sql.charCodeAt(i);
    if (isWordStart(code)) {
      let j = i + 1;
      while (j < sql.length && isWordPart(sql.charCodeAt(j))) j++;
      out.push({ type: "word", text: sql.slice(i, j), start, end: j, depth });
      i = j;
      continue;
    }
    if (isDigit(code) || (c === "." && isDigit(sql.charCodeAt(i + 1)))) {
      let j = i + 1;
      while (j < sql.length && isNumberPart(sql.charCodeAt(j))) {
        if ((sql[j] === "e" || sql[j] === "E") && (sql[j + 1] === "+" || sql[j + 1] === "-")) j++;
        j++;
      }
      out.push({ type: "number", text: sql.slice(i, j), start, end: j, depth });
      i = j;
      continue;
    }
    if (c === "?" || c === ":" || c === "@" || c === "$" || c === "#") {
      let j = i + 1;
      while (j < sql.length && isWordPart(sql.charCodeAt(j))) j++;
      out.push({ type: "variable", text: sql.slice(i, j), start, end: j, depth });
      i = j;
      continue;
    }
    if (c === ")") depth = Math.max(0, depth - 1);
    out.push({ type: "punct", text: c, start, end: i + 1, depth });
    if (c === "(") depth++;
    i++;
  }
  return out;
}

const CODE_TOKEN_MEMO = 512;
const codeTokenMemo = new Map<string, readonly Token[]>();

/**
 * The tokens that matter to SQLite: everything except comments. The last few hundred texts are
 * remembered: the grader asks about the same gold (its ORDER BY, its tie columns) at every grade. Callers
 * must not change the array they get.
 */
export function codeTokens(sql: string): Token[] {
  const hit = codeTokenMemo.get(sql);
  if (hit) return hit as Token[];
  const toks = tokenize(sql).filter((t) => t.type !== "comment");
  codeTokenMemo.set(sql, toks);
  if (codeTokenMemo.size > CODE_TOKEN_MEMO) codeTokenMemo.delete(codeTokenMemo.keys().next().value as string);
  return toks;
}

/** True when `t` is the punctuation character `p`. */
export function isPunct(t: Token | undefined, p: string): boolean {
  return t !== undefined && t.type === "punct" && t.text === p;
}

/** True when `t` is the keyword `w` (upper case), in any case. */
export function isWord(t: Token | undefined, w: string): boolean {
  return t !== undefined && t.type === "word" && t.text.toUpperCase() === w;
}
