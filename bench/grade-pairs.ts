/**
 * The grading pairs of `npm run bench:grade`: gold queries of the shop task set, each paired with itself
 * and with mutations of itself (a literal changed, an order reversed, a limit moved, a comparison
 * flipped, an aggregate swapped, DISTINCT added), as a model's near misses are. Deterministic: the same
 * golds give the same pairs.
 */
export interface GradePair {
  db: string;
  gold: string;
  pred: string;
}

type Mutator = (sql: string) => string | null;

const replaceFirst = (re: RegExp, f: (m: string, ...g: string[]) => string): Mutator => (sql) => (re.test(sql) ? sql.replace(re, f as (m: string) => string) : null);

/** Each turns a query into a near miss, or null when it does not apply. */
export const MUTATORS: Array<[string, Mutator]> = [
  ["literal", replaceFirst(/(?<![\w.'])(\d+)(?![\w.'])/, (n) => String(Number(n) + 1))],
  ["order", replaceFirst(/\b(DESC|ASC)\b/i, (d) => (d.toUpperCase() === "DESC" ? "ASC" : "DESC"))],
  ["limit", replaceFirst(/\bLIMIT\s+(\d+)/i, (_m, n) => `LIMIT ${Number(n) + 2}`)],
  ["compare", replaceFirst(/ (>=|<=|>|<) /, (op) => ({ " >= ": " > ", " <= ": " < ", " > ": " >= ", " < ": " <= " })[op] ?? op)],
  ["aggregate", replaceFirst(/\b(SUM|AVG|MAX|MIN)\(/i, (f) => ({ SUM: "AVG(", AVG: "SUM(", MAX: "MIN(", MIN: "MAX(" })[f.slice(0, -1).toUpperCase()] ?? f)],
  ["distinct", replaceFirst(/^SELECT (?!DISTINCT)/i, () => "SELECT DISTINCT ")],
  ["string", replaceFirst(/'([^']+)'/, (_m, s) => `'${s.toUpperCase() === s ? s.toLowerCase() : s.toUpperCase()}'`)],
];

/** `count` pairs over `golds` on `db`: per gold the gold itself, then its mutations, round-robin over golds. */
export function gradePairs(db: string, golds: string[], count: number): GradePair[] {
  const perGold = golds.map((g) => [g, ...MUTATORS.map(([, m]) => m(g)).filter((x): x is string => x !== null && x !== g)]);
  const out: GradePair[] = [];
  for (let round = 0; out.length < count; round++) {
    let added = false;
    for (let i = 0; i < golds.length && out.length < count; i++) {
      const p = perGold[i][round];
      if (p === undefined) continue;
      out.push({ db, gold: golds[i], pred: "```sql\n" + p + "\n```" });
      added = true;
    }
    if (!added) break;
  }
  return out;
}
