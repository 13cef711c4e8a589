/**
 * Plain-text rendering of stats for terminals and logs: aligned tables and the number formats the
 * readable outputs of `t2s report` and `t2s delta` share.
 */
import type { Interval } from "./bootstrap.js";

/** Returns `x` with 3 decimals, or "-" for null. */
export function fmt(x: number | null | undefined, digits = 3): string {
  return x === null || x === undefined || Number.isNaN(x) ? "-" : x.toFixed(digits);
}

/** Returns `x` with an explicit sign (+0.050 / -0.020), or "-" for null. */
export function fmtSigned(x: number | null | undefined, digits = 3): string {
  if (x === null || x === undefined) return "-";
  const s = x.toFixed(digits);
  return x >= 0 && !s.startsWith("-") ? `+${s}` : s;
}

/** Returns "[lo, hi]", or "-" when there is no interval. */
export function fmtCI(ci: Interval | null | undefined, digits = 3, signed = false): string {
  if (!ci) return "-";
  const f = signed ? fmtSigned : fmt;
  return `[${f(ci[0], digits)}, ${f(ci[1], digits)}]`;
}

/** Returns a p-value readably: 4 significant digits, "<0.0001" below that. */
export function fmtP(p: number | null | undefined): string {
  if (p === null || p === undefined) return "-";
  if (p < 1e-4) return "<0.0001";
  return p.toFixed(4);
}

/**
 * Returns the rows as an aligned text table (one line per row, header first, two spaces between
 * columns). Columns whose header is in `left` are left-aligned; the rest (numbers) right-aligned.
 */
export function formatTable(header: string[], rows: string[][], left: string[] = []): string {
  const widths = header.map((h, i) => rows.reduce((w, r) => Math.max(w, (r[i] ?? "").length), h.length));
  const line = (cells: string[]) =>
    cells
      .map((c, i) => (left.includes(header[i]) ? c.padEnd(widths[i]) : c.padStart(widths[i])))
      .join("  ")
      .trimEnd();
  return [line(header), ...rows.map(line)].join("\n") + "\n";
}
