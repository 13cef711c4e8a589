/**
 * Result-set equivalence: is the candidate's result the same answer as the gold's? The rules (each an
 * option of CompareOptions, defaults in brackets):
 *  - a candidate over the row cap (`truncated`) is too large and not compared;
 *  - two empty results match whatever their columns; otherwise column counts and row counts must be equal;
 *  - rows compare as multisets (duplicates count) unless row order matters [order "top-level": only when
 *    the gold has a top-level ORDER BY]; then rows tied on the gold's ORDER BY columns may be in any
 *    order among themselves [ties true];
 *  - any column order is accepted [columnOrder "free"], column names are ignored;
 *  - values compare by their canonical keys (values.ts): numbers rounded to [2] decimals, text trimmed and
 *    case-folded, numeric text as text [numericText false], NULL only equal to NULL, blobs by bytes;
 *  - `subset` (BIRD-Platinum): every candidate row must appear among the gold rows, with an optional row
 *    count rule, instead of equal multisets.
 */
import { T2sError } from "../core/errors.js";
import type { ExecSuccess, SqlValue } from "../db/types.js";
import type { CompareOptions, CompareResult } from "./types.js";
import { matchColumns, type KeyTable, type RowRule } from "./permute.js";
import { hasOrderByAnywhere, hasTopLevelOrderBy, resolveOrderColumn, topLevelOrderTerms, type OrderTerm } from "./clauses.js";
import { DEFAULT_VALUE_RULES, showValue, valueKey, type ValueRules } from "./values.js";

/** Returns the value rules that `opts` selects (defaults filled in). */
export function valueRulesOf(opts: CompareOptions): ValueRules {
  const r = opts.round;
  if (r !== undefined && r !== null && !(Number.isInteger(r) && r >= 0 && r <= 20)) {
    throw new T2sError("bad_compare_options", `round must be an integer 0-20 or null, got ${String(r)}`);
  }
  if (opts.order !== undefined && !ORDER_MODES.includes(opts.order)) {
    throw new T2sError("bad_compare_options", `order must be one of ${ORDER_MODES.join(", ")}, got ${String(opts.order)}`);
  }
  return {
    round: opts.round === undefined ? DEFAULT_VALUE_RULES.round : opts.round,
    numericText: opts.numericText ?? DEFAULT_VALUE_RULES.numericText,
    trim: opts.trim ?? DEFAULT_VALUE_RULES.trim,
    caseFold: opts.caseFold ?? DEFAULT_VALUE_RULES.caseFold,
  };
}

const ORDER_MODES: readonly string[] = ["top-level", "anywhere", "ignore", "always"];

/** Returns whether row order matters for this gold under `opts.order`. */
export function orderMatters(opts: CompareOptions): boolean {
  const mode = opts.order ?? "top-level";
  if (mode === "always") return true;
  if (mode === "ignore") return false;
  if (opts.goldSql === undefined) return false;
  return mode === "anywhere" ? hasOrderByAnywhere(opts.goldSql) : hasTopLevelOrderBy(opts.goldSql);
}

const shape = (rows: number, cols: number) => `${rows} row${rows === 1 ? "" : "s"} x ${cols} col${cols === 1 ? "" : "s"}`;

/** Compares a candidate result with the gold result; returns whether they match and why. */
export function compareResults(candidate: ExecSuccess, gold: ExecSuccess, opts: CompareOptions = {}): CompareResult {
  const rules = valueRulesOf(opts);
  if (candidate.truncated) return { match: false, tooLarge: true, reason: `result too large: more than ${candidate.rows.length} rows` };
  const cRows = candidate.rows.length;
  const gRows = gold.rows.length;
  const cCols = columnCount(candidate);
  const gCols = columnCount(gold);
  const got = `got ${shape(cRows, cCols)}, want ${shape(gRows, gCols)}`;
  if (cRows === 0 && gRows === 0) return { match: true, reason: "result matches (both empty)" };
  if (cRows === 0 || gRows === 0 || cCols !== gCols) return { match: false, reason: `result differs: ${got}` };
  // the candidate's result is the gold's own (the same query text, answered from the gold cache): every
  // value's key equals itself, so the identity column order matches, in order too; same reason as below
  if (candidate === gold && !opts.subset) {
    return { match: true, reason: `result matches (${shape(gRows, gCols)}${orderMatters(opts) && gRows > 1 ? ", in order" : ""})` };
  }
  const gKeys = keyTable(gold.rows, rules);
  const cKeys = keyTable(candidate.rows, rules);
  const strict = opts.columnOrder === "strict";

  if (opts.subset) {
    const want = opts.subsetRows;
    if (want && (want.op === "=" ? cRows !== want.n : cRows < want.n)) {
      return { match: false, reason: `result differs: got ${shape(cRows, cCols)}, want ${want.op === "=" ? "" : "at least "}${want.n} rows (subset of the gold's ${gRows})` };
    }
    if (matchColumns(gKeys, cKeys, gCols, { kind: "within" }, strict)) return { match: true, reason: `result matches (${shape(cRows, cCols)}, a subset of the gold's ${gRows} rows)` };
    return { match: false, reason: `result differs: ${got}; some rows are not among the gold rows` };
  }

  if (cRows !== gRows) return { match: false, reason: `result differs: ${got}` };
  const ordered = orderMatters(opts);
  const all: RowRule = { kind: "blocks", blocks: [[0, gRows]] };
  if (!ordered) {
    if (matchColumns(gKeys, cKeys, gCols, all, strict)) return { match: true, reason: `result matches (${shape(gRows, gCols)})` };
    return { match: false, reason: `result differs: ${got}; ${valueDifference(gold.rows, gKeys, cKeys)}` };
  }
  const blocks = orderBlocks(gold, gKeys, opts);
  if (matchColumns(gKeys, cKeys, gCols, { kind: "blocks", blocks }, strict)) {
    return { match: true, reason: `result matches (${shape(gRows, gCols)}${gRows > 1 ? ", in order" : ""})` };
  }
  if (matchColumns(gKeys, cKeys, gCols, all, strict)) {
    return { match: false, reason: `result differs: same rows (${shape(gRows, gCols)}) in a different order, and the gold orders its rows` };
  }
  return { match: false, reason: `result differs: ${got}; ${valueDifference(gold.rows, gKeys, cKeys)}` };
}

function columnCount(r: ExecSuccess): number {
  return r.columns.length > 0 ? r.columns.length : (r.rows[0]?.length ?? 0);
}

/** Returns the canonical key table of `rows`. */
export function keyTable(rows: SqlValue[][], rules: ValueRules): KeyTable {
  return rows.map((row) => row.map((v) => valueKey(v, rules)));
}

/** Names a gold row that the candidate lacks (compared with values sorted within each row), if any. */
function valueDifference(goldRows: SqlValue[][], gKeys: KeyTable, cKeys: KeyTable): string {
  const bag = new Map<string, number>();
  for (const row of cKeys) {
    const k = JSON.stringify([...row].sort());
    bag.set(k, (bag.get(k) ?? 0) + 1);
  }
  for (let r = 0; r < gKeys.length; r++) {
    const k = JSON.stringify([...gKeys[r]].sort());
    const c = bag.get(k);
    if (!c) return `gold row ${cut(goldRows[r].map(showValue).join(", "))} is missing`;
    bag.set(k, c - 1);
  }
  return "rows pair up only under different column orders";
}

function cut(s: string): string {
  return s.length > 120 ? `(${s.slice(0, 117)}...)` : `(${s})`;
}

/**
 * Blocks of gold row positions whose relative order is free: runs of rows tied on the ORDER BY columns
 * when the terms resolve to output columns and the gold rows really are sorted by them; else one block
 * per row.
 */
function orderBlocks(gold: ExecSuccess, gKeys: KeyTable, opts: CompareOptions): Array<[number, number]> {
  const perRow = gKeys.map((_, r): [number, number] => [r, r + 1]);
  if (opts.ties === false || opts.goldSql === undefined) return perRow;
  const terms = topLevelOrderTerms(opts.goldSql);
  if (!terms || terms.length === 0) return perRow;
  const cols = terms.map((t) => resolveOrderColumn(t, gold.columns));
  if (cols.some((c) => c < 0)) return perRow;
  if (!sortedBy(gold.rows, terms, cols)) return perRow;
  const blocks: Array<[number, number]> = [];
  const keyOf = (r: number) => JSON.stringify(cols.map((c) => gKeys[r][c]));
  let start = 0;
  for (let r = 1; r <= gKeys.length; r++) {
    if (r === gKeys.length || keyOf(r) !== keyOf(start)) {
      blocks.push([start, r]);
      start = r;
    }
  }
  return blocks;
}

/** True when `rows` are in the order SQLite's BINARY collation gives for these terms. */
function sortedBy(rows: SqlValue[][], terms: OrderTerm[], cols: number[]): boolean {
  for (let r = 1; r < rows.length; r++) {
    for (let t = 0; t < terms.length; t++) {
      const c = sqliteCompare(rows[r - 1][cols[t]], rows[r][cols[t]], terms[t]);
      if (c < 0) break;
      if (c > 0) return false;
      // equal on this term: the next term decides
    }
  }
  return true;
}

const classRank = (v: SqlValue) => (v === null ? 0 : typeof v === "number" || typeof v === "bigint" ? 1 : typeof v === "string" ? 2 : 3);

/** Numeric order of two numbers either of which may be a bigint (an INTEGER beyond 2^53). */
function compareNumbers(a: number | bigint, b: number | bigint): number {
  if (typeof a === "number" && typeof b === "number") return a - b;
  if (typeof a === "bigint" && typeof b === "bigint") return a < b ? -1 : a > b ? 1 : 0;
  // one bigint, one double: compare exactly unless the double is not an integer (then it never ties)
  const [x, y] = [a, b].map((v) => (typeof v === "bigint" || !Number.isInteger(v) ? v : BigInt(v)));
  if (typeof x === "bigint" && typeof y === "bigint") return x < y ? -1 : x > y ? 1 : 0;
  return Number(x) - Number(y);
}

function sqliteCompare(a: SqlValue, b: SqlValue, term: OrderTerm): number {
  const nullsFirst = term.nullsFirst ?? !term.desc;
  if (a === null || b === null) {
    if (a === null && b === null) return 0;
    return (a === null) === nullsFirst ? -1 : 1;
  }
  let c = classRank(a) - classRank(b);
  if (c === 0) {
    if (typeof a === "number" || typeof a === "bigint") c = compareNumbers(a, b as number | bigint);
    else if (typeof a === "string") c = Buffer.compare(Buffer.from(a), Buffer.from(b as string));
    else c = (a as { blob: string }).blob < (b as { blob: string }).blob ? -1 : (a as { blob: string }).blob > (b as { blob: string }).blob ? 1 : 0;
  }
  return term.desc ? -c : c;
}
