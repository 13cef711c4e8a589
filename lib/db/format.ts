/** Plain-text rendering of query results: an aligned table for people reading a terminal. */
import type { ExecOutcome, ExecSuccess, SqlValue } from "./types.js";

/** A value as it reads in a table: NULL, x'..' for blobs, numbers and text as they are. */
export function formatValue(v: SqlValue, maxWidth = 60): string {
  let s: string;
  if (v === null) s = "NULL";
  else if (typeof v === "object") s = `x'${v.blob}'`;
  else s = String(v);
  s = s.replace(/[\r\n\t]+/g, " ");
  return s.length > maxWidth ? `${s.slice(0, maxWidth - 3)}...` : s;
}

/** The result as an aligned text table with a footer giving the row count, time and truncation. */
export function formatResultTable(result: ExecSuccess, opts: { maxWidth?: number } = {}): string {
  const cells = result.rows.map((r) => r.map((v) => formatValue(v, opts.maxWidth)));
  const widths = result.columns.map((c, i) => Math.max(c.length, ...cells.map((r) => r[i].length)));
  const numeric = result.columns.map((_, i) => result.rows.length > 0 && result.rows.every((r) => typeof r[i] === "number" || r[i] === null));
  const line = (vals: string[]) => vals.map((v, i) => (numeric[i] ? v.padStart(widths[i]) : v.padEnd(widths[i]))).join(" | ").trimEnd();
  const out = [line(result.columns), widths.map((w) => "-".repeat(w)).join("-+-")];
  for (const r of cells) out.push(line(r));
  const n = result.rows.length;
  out.push(`(${n} row${n === 1 ? "" : "s"}${result.truncated ? `, truncated: more rows exist` : ""}, ${result.elapsedMs} ms)`);
  return out.join("\n") + "\n";
}

/** One line describing a failed outcome, or the table of a successful one. */
export function formatOutcome(outcome: ExecOutcome): string {
  if (outcome.ok === false) return `error [${outcome.error.kind}]: ${outcome.error.message}\n`;
  return formatResultTable(outcome);
}

const BIG_MARK = `\u0000t2s-int:${process.pid}:`;
const BIG_MARK_JSON = JSON.stringify(BIG_MARK).slice(1, -1);

/**
 * JSON text of a value that may hold bigints (INTEGERs beyond 2^53): each one is written as the exact JSON
 * number, not rounded to a double and not thrown on as JSON.stringify would.
 */
export function jsonWithIntegers(value: unknown): string {
  let big = false;
  const text = JSON.stringify(value, (_k, v: unknown) => {
    if (typeof v !== "bigint") return v;
    big = true;
    return BIG_MARK + v.toString();
  });
  if (!big) return text;
  return text.split(`"${BIG_MARK_JSON}`).map((part, i) => (i === 0 ? part : part.replace(/^(-?\d+)"/, "$1"))).join("");
}
