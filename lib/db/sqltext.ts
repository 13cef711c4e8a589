/**
 * A small SQLite lexer. It is not a parser: it only splits text into tokens the way SQLite does
 * (strings, quoted identifiers, comments, blob literals), so that policy checks never mistake the inside
 * of a string or comment for a keyword, and so that schema DDL comments can be recovered.
 */

export type TokenType = "word" | "quoted" | "string" | "blob" | "number" | "variable" | "punct" | "comment";

export interface Token {
  type: TokenType;
  /** The token as written (for `quoted`, the identifier without its quotes). */
  text: string;
  /** Offset of the first character in the source. */
  start: number;
  end: number;
}

// SQL character classes by UTF-16 code unit (charCodeAt), shared with the verifier's tokenizer: the lexers
// read every query the sandbox sees, and a regular expression per character costs more than the rest of
// the policy check.
/** [0-9] */
export const isDigit = (c: number) => c >= 48 && c <= 57;
const isLetter = (c: number) => (c >= 65 && c <= 90) || (c >= 97 && c <= 122);
/** [A-Za-z_\u0080-\uffff] */
export const isWordStart = (c: number) => isLetter(c) || c === 95 || c >= 128;
/** [A-Za-z0-9_$\u0080-\uffff] */
export const isWordPart = (c: number) => isWordStart(c) || isDigit(c) || c === 36;
/** [0-9A-Za-z_.]: the characters a numeric literal is read over. */
export const isNumberPart = (c: number) => isLetter(c) || isDigit(c) || c === 95 || c === 46;

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

/** Splits SQL text into tokens; comments are kept as `comment` tokens, whitespace is dropped. */
export function tokenize(sql: string): Token[] {
  const out: Token[] = [];
  let i = 0;
  while (i < sql.length) {
    const c = sql[i];
    if (c === " " || c === "\t" || c === "\n" || c === "\r" || c === "\f" || c === "\v") {
      i++;
      continue;
    }
    const start = i;
    if (c === "-" && sql[i + 1] === "-") {
      const nl = sql.indexOf("\n", i);
      i = nl < 0 ? sql.length : nl;
      out.push({ type: "comment", text: sql.slice(start + 2, i), start, end: i });
      continue;
    }
    if (c === "/" && sql[i + 1] === "*") {
      const close = sql.indexOf("*/", i + 2);
      i = close < 0 ? sql.length : close + 2;
      out.push({ type: "comment", text: sql.slice(start + 2, close < 0 ? sql.length : close), start, end: i });
      continue;
    }
    if ((c === "x" || c === "X") && sql[i + 1] === "'") {
      const q = closeQuoted(sql, i + 1, "'", false);
      out.push({ type: "blob", text: sql.slice(start, q.end), start, end: q.end });
      i = q.end;
      continue;
    }
    if (c === "'") {
      const q = closeQuoted(sql, i, "'", true);
      out.push({ type: "string", text: q.text, start, end: q.end });
      i = q.end;
      continue;
    }
    if (c === '"' || c === "`") {
      const q = closeQuoted(sql, i, c, true);
      out.push({ type: "quoted", text: q.text, start, end: q.end });
      i = q.end;
      continue;
    }
    if (c === "[") {
      const q = closeQuoted(sql, i, "]", false);
      out.push({ type: "quoted", text: q.text, start, end: q.end });
      i = q.end;
      continue;
    }
    const code = sql.charCodeAt(i);
    if (isWordStart(code)) {
      let j = i + 1;
      while (j < sql.length && isWordPart(sql.charCodeAt(j))) j++;
      out.push({ type: "word", text: sql.slice(i, j), start, end: j });
      i = j;
      continue;
    }
    if (isDigit(code) || (c === "." && isDigit(sql.charCodeAt(i + 1)))) {
      let j = i + 1;
      while (j < sql.length && isNumberPart(sql.charCodeAt(j))) {
        if ((sql[j] === "e" || sql[j] === "E") && (sql[j + 1] === "+" || sql[j + 1] === "-")) j++;
        j++;
      }
      out.push({ type: "number", text: sql.slice(i, j), start, end: j });
      i = j;
      continue;
    }
    if (c === "?" || c === ":" || c === "@" || c === "$" || c === "#") {
      let j = i + 1;
      while (j < sql.length && isWordPart(sql.charCodeAt(j))) j++;
      out.push({ type: "variable", text: sql.slice(i, j), start, end: j });
      i = j;
      continue;
    }
    out.push({ type: "punct", text: c, start, end: i + 1 });
    i++;
  }
  return out;
}

/** The tokens that matter to SQLite: everything except comments. */
export function codeTokens(sql: string): Token[] {
  return tokenize(sql).filter((t) => t.type !== "comment");
}
