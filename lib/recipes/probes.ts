/**
 * Probing queries a careful analyst runs before committing an answer, derived from a task's gold query:
 * the distinct values of a column the query filters on by a string (or the matching values when the
 * column has many), the date range of a column filtered by year or date, a preview of the first join,
 * and a row count of the main table. The tool-use transcripts (tool-data.ts) show the model running them.
 * Derivation only reads the gold query's tokens and the schema; whether a probe runs is checked by the
 * caller on the live database.
 */
import { codeTokens, type Token } from "../db/sqltext.js";

export type ProbeKind = "values" | "matches" | "date_range" | "join_preview" | "count";

export interface Probe {
  kind: ProbeKind;
  sql: string;
}

/** Distinct values above this count are probed with a LIKE on the literal instead of listed. */
export const LIST_VALUES_MAX = 20;

const CLAUSE_END = new Set(["where", "group", "order", "having", "limit", "join", "left", "inner", "cross", "union", "on", "natural"]);
const KEYWORDS = new Set([...CLAUSE_END, "as", "select", "from", "and", "or", "not", "exists", "in", "is", "null", "case", "when", "then", "else", "end"]);

const lower = (t: Token | undefined) => (t && t.type === "word" ? t.text.toLowerCase() : "");
const quoteString = (s: string) => `'${s.replace(/'/g, "''")}'`;

interface Source {
  table: string;
  alias: string;
}

/** The tables of FROM and JOIN clauses (any depth), with their aliases (the table name when none). */
function sources(tokens: Token[], columns: Map<string, string[]>): Source[] {
  const out: Source[] = [];
  tokens.forEach((t, i) => {
    const w = lower(t);
    if (w !== "from" && w !== "join") return;
    const name = tokens[i + 1];
    if (!name || (name.type !== "word" && name.type !== "quoted") || !columns.has(name.text.toLowerCase())) return;
    let j = i + 2;
    if (lower(tokens[j]) === "as") j++;
    const a = tokens[j];
    const alias = a && a.type === "word" && !KEYWORDS.has(a.text.toLowerCase()) ? a.text : name.text;
    out.push({ table: name.text.toLowerCase(), alias: alias.toLowerCase() });
  });
  return out;
}

/** Resolves `alias.col` or a bare `col` to its table, or null. */
function resolveColumn(qualifier: string | null, column: string, from: Source[], columns: Map<string, string[]>): { table: string; column: string } | null {
  const has = (table: string) => (columns.get(table) ?? []).find((c) => c.toLowerCase() === column.toLowerCase());
  const candidates = qualifier ? from.filter((s) => s.alias === qualifier.toLowerCase()) : from;
  for (const s of candidates) {
    const c = has(s.table);
    if (c) return { table: s.table, column: c };
  }
  return null;
}

/** The column reference that ends at token index `end` (inclusive): `a.b` or `b`. */
function columnBefore(tokens: Token[], end: number): { qualifier: string | null; column: string } | null {
  const col = tokens[end];
  if (!col || (col.type !== "word" && col.type !== "quoted") || KEYWORDS.has(col.text.toLowerCase())) return null;
  if (tokens[end - 1]?.text === "." && tokens[end - 2] && (tokens[end - 2].type === "word" || tokens[end - 2].type === "quoted")) {
    return { qualifier: tokens[end - 2].text, column: col.text };
  }
  return { qualifier: null, column: col.text };
}

/** The longest word of a literal (at least 3 letters), for a LIKE probe. */
function keyWord(literal: string): string | null {
  const words = literal.split(/[^A-Za-z0-9]+/).filter((w) => w.length >= 3);
  return words.sort((a, b) => b.length - a.length || (a < b ? -1 : 1))[0] ?? null;
}

/**
 * The probes for one gold query, most specific first, without duplicates. `distinctCount(table, column)`
 * says how many distinct values a column holds (read from the database), to choose between listing them
 * and matching the literal.
 */
export function probesFor(gold: string, columns: Map<string, string[]>, distinctCount: (table: string, column: string) => number): Probe[] {
  const tokens = codeTokens(gold);
  const from = sources(tokens, columns);
  if (from.length === 0) return [];
  const out: Probe[] = [];
  const seen = new Set<string>();
  const add = (kind: ProbeKind, sql: string) => {
    if (!seen.has(sql)) {
      seen.add(sql);
      out.push({ kind, sql });
    }
  };

  tokens.forEach((t, i) => {
    // strftime('%Y', col) = '2025', or col >= '2024-01-01': the column's date range
    if (lower(t) === "strftime" && tokens[i + 1]?.text === "(" && tokens[i + 2]?.type === "string" && tokens[i + 3]?.text === ",") {
      let close = i + 4;
      while (close < tokens.length && tokens[close].text !== ")") close++;
      const ref = columnBefore(tokens, close - 1);
      const r = ref && resolveColumn(ref.qualifier, ref.column, from, columns);
      if (r) add("date_range", `SELECT MIN(${r.column}), MAX(${r.column}) FROM ${r.table}`);
      return;
    }
    if (t.type !== "string") return;
    // col = 'x', col IN ('x', ...), col LIKE 'x'
    const prev = tokens[i - 1];
    let opEnd: number;
    if (prev?.text === "(" && lower(tokens[i - 2]) === "in") opEnd = i - 3;
    else if (lower(prev) === "like") opEnd = i - 2;
    else if (prev && (prev.text === "=" || prev.text === ">" || prev.text === "<")) {
      opEnd = i - 2;
      if (["<", ">", "!"].includes(tokens[opEnd]?.text ?? "")) opEnd--;
    } else return;
    if (tokens[opEnd]?.text === ")") return; // strftime(...) = '...' handled above
    const ref = columnBefore(tokens, opEnd);
    const r = ref && resolveColumn(ref.qualifier, ref.column, from, columns);
    if (!r) return;
    if (/^\d{4}-\d{2}(-\d{2})?/.test(t.text)) {
      add("date_range", `SELECT MIN(${r.column}), MAX(${r.column}) FROM ${r.table}`);
      return;
    }
    if (distinctCount(r.table, r.column) <= LIST_VALUES_MAX) {
      add("values", `SELECT DISTINCT ${r.column} FROM ${r.table} ORDER BY ${r.column}`);
      return;
    }
    const word = keyWord(t.text);
    if (word) add("matches", `SELECT DISTINCT ${r.column} FROM ${r.table} WHERE ${r.column} LIKE ${quoteString(`%${word}%`)} ORDER BY ${r.column} LIMIT 10`);
  });

  // the first join of the outer query, as written: a preview of three joined rows
  const join = tokens.findIndex((t) => lower(t) === "join");
  const on = join < 0 ? -1 : tokens.findIndex((t, k) => k > join && lower(t) === "on");
  if (join > 0 && on > 0 && from.length >= 2) {
    // the condition runs to the next clause keyword outside parentheses (or a parenthesis it did not open)
    let end = on + 1;
    for (let depth = 0; end < tokens.length; end++) {
      const x = tokens[end].text;
      if (x === "(") depth++;
      else if (x === ")" && --depth < 0) break;
      else if (depth === 0 && CLAUSE_END.has(lower(tokens[end]))) break;
    }
    const first = from[0];
    const second = from[1];
    const alias = (s: Source) => (s.alias === s.table ? s.table : `${s.table} ${s.alias}`);
    const cond = gold.slice(tokens[on + 1].start, tokens[end - 1].end);
    if (end > on + 1) add("join_preview", `SELECT * FROM ${alias(first)} JOIN ${alias(second)} ON ${cond} LIMIT 3`);
  }
  add("count", `SELECT COUNT(*) FROM ${from[0].table}`);
  return out;
}
