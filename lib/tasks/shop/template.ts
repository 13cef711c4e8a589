/**
 * What a shop question template is: given the inventory and a seeded generator it writes one draft, a
 * question's parts (what is asked, what exactly to return) together with its gold SQL. Styles then frame
 * the parts into a sentence (style.ts).
 */
import type { SeededRandom } from "../../core/random.js";
import type { Inventory, PersonRow } from "./inventory.js";

export const ARCHETYPES = [
  "aggregation",
  "top_n",
  "join_two",
  "join_multi",
  "group_having",
  "null_semantics",
  "self_join",
  "date_buckets",
  "anti_join",
  "derived_metric",
] as const;
export type Archetype = (typeof ARCHETYPES)[number];

export const DIFFICULTIES = ["easy", "medium", "hard"] as const;
export type Level = (typeof DIFFICULTIES)[number];

export interface Draft {
  /** Noun-phrase alternatives for what is asked, including which rows count. */
  subject: string[];
  /** Alternatives for what to return: columns in words, rounding, order. */
  returns: string[];
  /** Column names for the analyst style, in output order. */
  columns: string[];
  sql: string;
}

export interface Ctx {
  inv: Inventory;
  rng: SeededRandom;
}

export interface Template {
  name: string;
  archetype: Archetype;
  difficulty: Level;
  /** A draft, or null when the inventory lacks the values this template needs. */
  make(c: Ctx): Draft | null;
}

/** Picks from a list, or returns undefined when it is empty. */
export function maybe<T>(c: Ctx, xs: readonly T[]): T | undefined {
  return xs.length ? c.rng.pick(xs) : undefined;
}

export function int(c: Ctx, lo: number, hi: number): number {
  return c.rng.between(lo, hi);
}

/** A SQL string literal. */
export function lit(s: string): string {
  return `'${s.replace(/'/g, "''")}'`;
}

export function full(p: PersonRow): string {
  return `${p.first} ${p.last}`;
}

const MONTHS = ["January", "February", "March", "April", "May", "June", "July", "August", "September", "October", "November", "December"];

/** 'YYYY-MM' as "March 2024". */
export function monthName(ym: string): string {
  return `${MONTHS[Number(ym.slice(5, 7)) - 1]} ${ym.slice(0, 4)}`;
}

/** Return-phrase alternatives for one number. */
export function oneNumber(what: string, round = false): string[] {
  const r = round ? ", rounded to 2 decimals" : "";
  const r2 = round ? " (rounded to 2 decimal places)" : "";
  return [`a single number: ${what}${r}`, `${what} only${r2}`, `one value, ${what}${r}`];
}

/** Said wherever products are grouped by their own category, since some categories have subcategories. */
export const FILED = "a product counts only toward the category it is filed in, not that category's parents";

/** A recursive CTE mapping every category to its top-level ancestor: root(category_id, top_id). */
export const ROOT_CTE = "WITH RECURSIVE root(category_id, top_id) AS (SELECT category_id, category_id FROM categories WHERE parent_id IS NULL UNION ALL SELECT c.category_id, r.top_id FROM categories c JOIN root r ON c.parent_id = r.category_id)";

/** SQL fragment: revenue statuses per the NOTES. */
export const REVENUE_STATUSES = "('paid', 'shipped', 'delivered')";
export const REVENUE_RULE = ["counting only orders with status paid, shipped or delivered", "where only paid, shipped or delivered orders count", "using orders whose status is paid, shipped or delivered"];

/** Shorthand to declare a template. */
export function tpl(name: string, archetype: Archetype, difficulty: Level, make: (c: Ctx) => Draft | null): Template {
  return { name, archetype, difficulty, make };
}
