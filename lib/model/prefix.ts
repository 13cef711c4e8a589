/** Shared prompt prefixes: the system prompt with the schema is the same in every row of a batch. */

/** Length of the longest prefix all rows share (0 for no rows). */
export function commonPrefix(rows: number[][]): number {
  if (rows.length === 0) return 0;
  const n = Math.min(...rows.map((r) => r.length));
  for (let i = 0; i < n; i++) {
    const v = rows[0][i];
    if (rows.some((r) => r[i] !== v)) return i;
  }
  return n;
}
