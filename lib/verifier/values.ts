/**
 * Canonical keys of result values: two values are equal under the comparison rules exactly when their keys
 * are equal, so rows can be hashed and counted as multisets.
 *
 * Numbers (INTEGER and REAL alike) with `round` = d decimals are rounded exactly as SQLite's ROUND(x, d)
 * rounds them: half away from zero on the exact binary value. So 0.125 -> 0.13 and -0.125 -> -0.13 (these
 * are exact halves), but 2.675 -> 2.67 and 1.005 -> 1.00, because the doubles nearest to them lie just
 * below the half. The point of this rule is that a query that rounds in SQL always matches one that does
 * not. A rounded zero loses its sign (-0 = 0, -0.001 = 0). Integer values are written exactly. With
 * `round` null numbers compare exactly (only -0 = 0 still holds).
 * Text: trimmed (the Unicode White_Space characters, e.g. U+0085 and U+3000, but not U+FEFF, which
 * JavaScript's trim() strips and Unicode does not count as white space), then case-folded: NFC, lower case, upper case, lower case, NFC. The
 * round trip through upper case applies the full case mappings, so 'STRASSE' = 'straße' = 'STRAẞE',
 * 'ſ' = 's', and composed and decomposed accents agree ('é' = 'e\u0301'); dotless 'ı' stays apart from 'i'.
 * This groups characters as Unicode full case folding does (checked against Python's str.casefold on every
 * code point). Either step can be turned off.
 * Numeric text ('1,234.50', '$12', ' 3 ') counts as a number only with `numericText`; otherwise text
 * '1' and the number 1 differ. NULL equals only NULL. Blobs compare by their bytes and never equal text.
 */
import type { SqlValue } from "../db/types.js";

export interface ValueRules {
  /** Decimals numbers are rounded to; null compares numbers exactly. Default 2. */
  round: number | null;
  /** Text that reads as a number compares as that number. Default false. */
  numericText: boolean;
  /** Trim text. Default true. */
  trim: boolean;
  /** Case-fold text. Default true. */
  caseFold: boolean;
}

export const DEFAULT_VALUE_RULES: ValueRules = { round: 2, numericText: false, trim: true, caseFold: true };

/** Returns the canonical key of one value under `rules`. */
export function valueKey(v: SqlValue, rules: ValueRules): string {
  if (v === null || v === undefined) return "z";
  if (typeof v === "number") return "n" + numberKey(v, rules.round);
  if (typeof v === "bigint") return "n" + (v as bigint).toString();
  if (typeof v === "string") {
    if (rules.numericText) {
      const num = parseNumericText(v);
      if (num !== null) return "n" + numberKey(num, rules.round);
    }
    return "s" + foldText(v, rules);
  }
  if (typeof v === "object" && typeof (v as { blob?: unknown }).blob === "string") return "b" + (v as { blob: string }).blob.toLowerCase();
  return "u" + JSON.stringify(v);
}

/** Returns text as compared: trimmed and case-folded per `rules`. */
export function foldText(s: string, rules: Pick<ValueRules, "trim" | "caseFold">): string {
  const t = rules.trim ? trimWhiteSpace(s) : s;
  if (!rules.caseFold) return t;
  // eslint-disable-next-line no-control-regex
  if (/^[\x00-\x7f]*$/.test(t)) return t.toLowerCase();
  // lower first so that capital sharp s (U+1E9E) also reaches "ss"; dotless i is kept apart, because its
  // upper case is I and Unicode case folding does not map it to i
  return t
    .normalize("NFC")
    .split("\u0131")
    .map((part) => part.toLowerCase().toUpperCase().toLowerCase())
    .join("\u0131")
    .normalize("NFC");
}

/** The characters with the Unicode White_Space property (UCD PropList.txt), and nothing else. */
const WHITE_SPACE = "\t\n\v\f\r \u0085\u00a0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008\u2009\u200a\u2028\u2029\u202f\u205f\u3000";
const LEADING = new RegExp(`^[${WHITE_SPACE}]+`);
const TRAILING = new RegExp(`[${WHITE_SPACE}]+$`);

/** `s` without leading and trailing Unicode White_Space. */
export function trimWhiteSpace(s: string): string {
  return s.replace(LEADING, "").replace(TRAILING, "");
}

const NUMERIC_TEXT = /^[+-]?\$?(?:\d{1,3}(?:,\d{3})+|\d+)?(?:\.\d+)?(?:[eE][+-]?\d+)?$/;

/** Returns the number a text reads as ('1,234.50' -> 1234.5, '$3' -> 3), or null. */
export function parseNumericText(s: string): number | null {
  const t = trimWhiteSpace(s);
  if (!NUMERIC_TEXT.test(t) || !/\d/.test(t.replace(/[eE][+-]?\d+$/, ""))) return null;
  const n = Number(t.replace(/[$,]/g, ""));
  return Number.isFinite(n) ? n : null;
}

/** Returns the canonical decimal text of `x` rounded to `round` decimals (see the module comment). */
export function numberKey(x: number, round: number | null): string {
  if (Number.isNaN(x)) return "nan";
  if (!Number.isFinite(x)) return x > 0 ? "inf" : "-inf";
  if (x === 0) return "0";
  if (Number.isInteger(x)) return BigInt(x).toString();
  if (round === null) return String(x);
  // toFixed rounds the exact binary value half away from zero, as SQLite's ROUND does (checked on 200k values)
  let t = x.toFixed(round);
  if (t.includes(".")) t = t.replace(/0+$/, "").replace(/\.$/, "");
  return t === "-0" ? "0" : t;
}

/** Renders a value for a reason message ('text', 3.5, NULL, x'00ff'), cut to a readable length. */
export function showValue(v: SqlValue): string {
  if (v === null || v === undefined) return "NULL";
  if (typeof v === "number" || typeof v === "bigint") return String(v);
  if (typeof v === "string") return JSON.stringify(v.length > 40 ? v.slice(0, 40) + "..." : v);
  if (typeof v === "object" && "blob" in v) return `x'${v.blob.slice(0, 16)}${v.blob.length > 16 ? "..." : ""}'`;
  return String(v);
}
