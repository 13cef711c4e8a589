/**
 * Spider's hardness levels (easy, medium, hard, extra) computed from a query's components the way Spider's
 * official evaluator counts them on its parsed SQL, here counted on the kit's tokens:
 *  - component 1: one each for WHERE, GROUP BY, ORDER BY and LIMIT; one per table joined beyond the first;
 *    one per OR among the join, WHERE and HAVING conditions; one per LIKE condition among them;
 *  - component 2: one per subquery used as a value in a join, WHERE or HAVING condition, plus one for an
 *    INTERSECT, UNION or EXCEPT (only the statement's own levels count, not those inside subqueries);
 *  - others: one when more than one aggregate is counted (aggregated SELECT items, WHERE conditions
 *    negated with NOT - the evaluator's own counting rule, kept as it is - aggregated GROUP BY and ORDER BY
 *    terms, and HAVING's AND/OR links and negated conditions, again as the evaluator counts them), one for
 *    more than one SELECT item, one for more than one WHERE condition, one for more than one GROUP BY term.
 * Then: easy when c1 <= 1, others = 0, c2 = 0; medium when (others <= 2, c1 <= 1, c2 = 0) or
 * (c1 <= 2, others < 2, c2 = 0); hard when (others > 2, c1 <= 2, c2 = 0) or (2 < c1 <= 3, others <= 2,
 * c2 = 0) or (c1 <= 1, others = 0, c2 <= 1); else extra.
 */
import { codeTokens, isPunct, type Token } from "../db/sqltext.js";

export type SpiderHardness = "easy" | "medium" | "hard" | "extra";

const AGGREGATES = new Set(["MAX", "MIN", "COUNT", "SUM", "AVG"]);
const CLAUSES = new Set(["FROM", "WHERE", "GROUP", "HAVING", "ORDER", "LIMIT"]);
const SET_OPS = new Set(["INTERSECT", "UNION", "EXCEPT"]);

/** The counts of one statement level. */
export interface HardnessCounts {
  component1: number;
  component2: number;
  others: number;
}

const up = (t: Token | undefined) => (t && t.type === "word" ? t.text.toUpperCase() : "");

/** The Spider hardness of `sql`, or null when it is not a SELECT statement the rules apply to. */
export function spiderHardness(sql: string): SpiderHardness | null {
  const c = hardnessCounts(sql);
  if (!c) return null;
  const { component1: c1, component2: c2, others } = c;
  if (c1 <= 1 && others === 0 && c2 === 0) return "easy";
  if ((others <= 2 && c1 <= 1 && c2 === 0) || (c1 <= 2 && others < 2 && c2 === 0)) return "medium";
  if ((others > 2 && c1 <= 2 && c2 === 0) || (c1 > 2 && c1 <= 3 && others <= 2 && c2 === 0) || (c1 <= 1 && others === 0 && c2 <= 1)) return "hard";
  return "extra";
}

/** The three counts of the statement's outermost level, or null when it does not start with SELECT. */
export function hardnessCounts(sql: string): HardnessCounts | null {
  const toks = codeTokens(sql).filter((t) => !isPunct(t, ";"));
  const first = toks.findIndex((t) => !isPunct(t, "("));
  if (first < 0 || up(toks[first]) !== "SELECT") return null;
  return countLevel(toks.slice(first), toks[first].depth);
}

/** Splits [from, to) at the given depth wherever `cut` says so; returns the pieces (cut tokens dropped). */
function split(toks: Token[], from: number, to: number, depth: number, cut: (t: Token, i: number) => boolean): Array<[number, number]> {
  const out: Array<[number, number]> = [];
  let start = from;
  for (let i = from; i < to; i++) {
    if (toks[i].depth === depth && cut(toks[i], i)) {
      out.push([start, i]);
      start = i + 1;
    }
  }
  out.push([start, to]);
  return out.filter(([a, b]) => b > a);
}

interface Conditions {
  units: Array<[number, number]>;
  ors: number;
  ands: number;
}

/** A condition list split on AND/OR at `depth` (the AND of BETWEEN x AND y is not a separator). */
function conditions(toks: Token[], from: number, to: number, depth: number): Conditions {
  let ors = 0;
  let ands = 0;
  let between = false;
  const units = split(toks, from, to, depth, (t) => {
    const w = up(t);
    if (w === "BETWEEN") between = true;
    if (w === "AND" && between) {
      between = false;
      return false;
    }
    if (w === "AND") ands++;
    if (w === "OR") ors++;
    return w === "AND" || w === "OR";
  });
  return { units, ors, ands };
}

/** Subqueries used as values in a condition: "(" at the condition's depth opening a SELECT. */
function subqueries(toks: Token[], [a, b]: [number, number], depth: number): number {
  let n = 0;
  for (let i = a; i + 1 < b; i++) if (toks[i].depth === depth && isPunct(toks[i], "(") && up(toks[i + 1]) === "SELECT") n++;
  return n;
}

const negated = (toks: Token[], [a, b]: [number, number]) => toks.slice(a, b).some((t, i, all) => up(t) === "NOT" && up(all[i - 1]) !== "IS");
const isLike = (toks: Token[], [a, b]: [number, number], depth: number) => toks.slice(a, b).some((t) => t.depth === depth && up(t) === "LIKE");
/** Aggregate calls at the term's own depth ("count(*)", "sum(a) - sum(b)" counts 2). */
const aggregates = (toks: Token[], [a, b]: [number, number], depth: number) => {
  let n = 0;
  for (let i = a; i + 1 < b; i++) if (toks[i].depth === depth && AGGREGATES.has(up(toks[i])) && isPunct(toks[i + 1], "(")) n++;
  return n;
};

function countLevel(toks: Token[], depth: number): HardnessCounts {
  const setOp = toks.findIndex((t) => t.depth === depth && SET_OPS.has(up(t)));
  const end = setOp < 0 ? toks.length : setOp;
  // clause starts at this depth
  const at: Record<string, number> = {};
  for (let i = 1; i < end; i++) {
    const w = up(toks[i]);
    if (toks[i].depth === depth && CLAUSES.has(w) && at[w] === undefined) at[w] = i;
  }
  const starts = Object.values(at).sort((x, y) => x - y);
  const clauseEnd = (k: number) => starts.find((s) => s > k) ?? end;
  const range = (w: string, skip: number): [number, number] | null => (at[w] === undefined ? null : [at[w] + skip, clauseEnd(at[w])]);

  const sel = [1, at.FROM ?? clauseEnd(0)] as [number, number];
  if (up(toks[sel[0]]) === "DISTINCT") sel[0]++;
  const items = split(toks, sel[0], sel[1], depth, (t) => isPunct(t, ","));

  let tables = 0;
  const fromConds: Conditions = { units: [], ors: 0, ands: 0 };
  const from = range("FROM", 1);
  if (from) {
    // segments between JOIN / "," ; each holds a table (or subquery) and maybe ON conditions
    for (const [a, b] of split(toks, from[0], from[1], depth, (t) => up(t) === "JOIN" || isPunct(t, ","))) {
      const on = toks.slice(a, b).findIndex((t) => t.depth === depth && up(t) === "ON");
      const head = toks.slice(a, on < 0 ? b : a + on).filter((t) => !["LEFT", "RIGHT", "INNER", "OUTER", "CROSS", "NATURAL", "FULL"].includes(up(t)));
      if (head.length > 0) tables++;
      if (on >= 0) {
        const c = conditions(toks, a + on + 1, b, depth);
        fromConds.units.push(...c.units);
        fromConds.ors += c.ors;
      }
    }
  }
  const whereRange = range("WHERE", 1);
  const where = whereRange ? conditions(toks, whereRange[0], whereRange[1], depth) : { units: [], ors: 0, ands: 0 };
  const havingRange = range("HAVING", 1);
  const having = havingRange ? conditions(toks, havingRange[0], havingRange[1], depth) : { units: [], ors: 0, ands: 0 };
  const groupRange = range("GROUP", 2);
  const groups = groupRange ? split(toks, groupRange[0], groupRange[1], depth, (t) => isPunct(t, ",")) : [];
  const orderRange = range("ORDER", 2);
  const orders = orderRange ? split(toks, orderRange[0], orderRange[1], depth, (t) => isPunct(t, ",")) : [];

  const allConds = [...fromConds.units, ...where.units, ...having.units];
  let c1 = 0;
  if (where.units.length) c1++;
  if (groups.length) c1++;
  if (orders.length) c1++;
  if (at.LIMIT !== undefined) c1++;
  if (tables > 0) c1 += tables - 1;
  c1 += fromConds.ors + where.ors + having.ors;
  c1 += allConds.filter((u) => isLike(toks, u, depth)).length;

  let c2 = allConds.reduce((n, u) => n + subqueries(toks, u, depth), 0);
  if (setOp >= 0) c2++;

  let agg = items.filter(([a, b]) => b > a && AGGREGATES.has(up(toks[a])) && isPunct(toks[a + 1], "(")).length;
  agg += where.units.filter((u) => negated(toks, u)).length;
  agg += groups.filter((g) => aggregates(toks, g, depth) > 0).length;
  agg += orders.reduce((n, o) => n + Math.min(2, aggregates(toks, o, depth)), 0);
  agg += having.ands + having.ors + having.units.filter((u) => negated(toks, u)).length;
  let others = 0;
  if (agg > 1) others++;
  if (items.length > 1) others++;
  if (where.units.length > 1) others++;
  if (groups.length > 1) others++;
  return { component1: c1, component2: c2, others };
}
