/**
 * Tool output shown to the model: result sets rendered as text, capped by rows, and long text cut in the
 * middle (`head ...(truncated)... tail`) so both the start and the end stay visible.
 */
import type { ExecOutcome, SqlValue } from "../db/types.js";
import { TOOL_CHARS, TOOL_ROWS } from "../core/defaults.js";

export const TRUNCATION_MARK = "...(truncated)...";

export interface ToolOutputOptions {
  /** Rows shown at most (default TOOL_ROWS). */
  maxRows?: number;
  /** Characters kept when cutting in the middle (default TOOL_CHARS). */
  maxChars?: number;
  /** "middle": cut the text in the middle at maxChars; "rows": keep whole rows only (cells capped at 200 chars). */
  mode?: "middle" | "rows";
}

/** Returns `text` unchanged when it fits, else its first and last characters joined by the truncation mark (total `maxChars` of content). */
export function truncateMiddle(text: string, maxChars = TOOL_CHARS): string {
  if (text.length <= maxChars) return text;
  const head = Math.ceil(maxChars / 2);
  const tail = maxChars - head;
  return text.slice(0, head) + TRUNCATION_MARK + (tail > 0 ? text.slice(text.length - tail) : "");
}

function cell(v: SqlValue, cap: number): string {
  let s: string;
  if (v === null) s = "NULL";
  else if (typeof v === "object") s = `x'${v.blob}'`;
  else s = String(v);
  return s.length > cap ? s.slice(0, cap) + "..." : s;
}

/** Renders an execution outcome as the text of a tool result (header line, one line per row, notes). */
export function formatToolResult(outcome: ExecOutcome, opts: ToolOutputOptions = {}): string {
  const maxRows = opts.maxRows ?? TOOL_ROWS;
  const mode = opts.mode ?? "middle";
  if (outcome.ok === false) {
    const text = `error (${outcome.error.kind}): ${outcome.error.message}`;
    return mode === "middle" ? truncateMiddle(text, opts.maxChars ?? TOOL_CHARS) : text;
  }
  const cap = mode === "rows" ? 200 : Infinity;
  const lines = [outcome.columns.join(" | ")];
  const shown = outcome.rows.slice(0, maxRows);
  for (const r of shown) lines.push(r.map((v) => cell(v, cap)).join(" | "));
  if (outcome.rows.length === 0) lines.push("(no rows)");
  if (outcome.rows.length > shown.length || outcome.truncated) lines.push(`(only the first ${shown.length} rows are shown)`);
  const text = lines.join("\n");
  return mode === "middle" ? truncateMiddle(text, opts.maxChars ?? TOOL_CHARS) : text;
}
