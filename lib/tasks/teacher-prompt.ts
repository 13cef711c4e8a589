/**
 * What the teacher model is told: the schema, the notes, a live data inventory, and per request the
 * archetype, difficulty and style wanted, with rules that make questions unambiguous and golds checkable.
 */
import type { Archetype, Level } from "./shop/template.js";
import type { Style } from "./shop/style.js";
import { openReadOnly } from "../db/connection.js";

export const ARCHETYPE_TEXT: Record<Archetype, string> = {
  aggregation: "single-table aggregation (COUNT/SUM/AVG/MIN/MAX over one table with filters)",
  top_n: "top-N with ORDER BY ... LIMIT",
  join_two: "a join of exactly two tables",
  join_multi: "a join of three or more tables",
  group_having: "GROUP BY with HAVING",
  null_semantics: "NULL semantics (IS NULL, COUNT(col) vs COUNT(*), COALESCE, what a NULL means)",
  self_join: "self-join or hierarchy (a table joined to itself, or a recursive CTE)",
  date_buckets: "date/time buckets (per month, quarter, year, weekday; durations)",
  anti_join: "anti-join or existence (NOT EXISTS, NOT IN, EXISTS)",
  derived_metric: "a derived metric (order total with discount and shipping, margin, average rating, share, days to ship)",
};

export const DIFFICULTY_TEXT: Record<Level, string> = {
  easy: "one table or one simple join, 1-2 filters",
  medium: "grouping, a derived column or a join",
  hard: "a join plus aggregation plus a trap or NULL handling, or nested logic",
};

export const STYLE_TEXT: Record<Style, string> = {
  casual: "casual: how a busy colleague would ask in chat, plain words, no column names",
  formal: "formal: a complete, polite request in full sentences, no column names",
  terse: "terse: as few words as possible, no pleasantries, no column names",
  analyst: "analyst: precise, may name the output columns",
};

function qi(name: string): string {
  return `"${name.replace(/"/g, '""')}"`;
}

/** A compact inventory of the data: row counts, and for each column either its few values or its range. */
export function dataInventory(dbPath: string, maxValues = 25): string {
  const db = openReadOnly(dbPath);
  try {
    const tables = (db.prepare("SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' ORDER BY name").all() as { name: string }[]).map((r) => r.name);
    const lines: string[] = [];
    for (const t of tables) {
      const n = (db.prepare(`SELECT COUNT(*) AS n FROM ${qi(t)}`).get() as { n: number }).n;
      lines.push(`${t}: ${n} rows`);
      const cols = db.prepare(`PRAGMA table_info(${qi(t)})`).all() as { name: string }[];
      for (const { name } of cols) {
        const c = qi(name);
        const s = db.prepare(`SELECT COUNT(DISTINCT ${c}) AS d, SUM(${c} IS NULL) AS nulls, MIN(${c}) AS lo, MAX(${c}) AS hi FROM ${qi(t)}`).get() as { d: number; nulls: number; lo: unknown; hi: unknown };
        const nullTxt = s.nulls ? `, ${s.nulls} NULL` : "";
        if (s.d <= maxValues) {
          const vals = (db.prepare(`SELECT ${c} AS v, COUNT(*) AS k FROM ${qi(t)} WHERE ${c} IS NOT NULL GROUP BY ${c} ORDER BY k DESC, v LIMIT ${maxValues}`).all() as { v: unknown; k: number }[])
            .map((r) => `${JSON.stringify(r.v)} (${r.k})`)
            .join(", ");
          lines.push(`  ${name}: ${s.d} distinct${nullTxt}: ${vals}`);
        } else lines.push(`  ${name}: ${s.d} distinct${nullTxt}, from ${JSON.stringify(s.lo)} to ${JSON.stringify(s.hi)}`);
      }
    }
    return lines.join("\n");
  } finally {
    db.close();
  }
}

/** The system message: schema, notes, inventory and the rules for questions and gold SQL. */
export function teacherSystemPrompt(ddl: string, notes: string | undefined, inventory: string): string {
  return [
    "You write benchmark tasks for text-to-SQL: natural-language questions about a SQLite database, each with its exact gold query.",
    "Database schema (SQLite):",
    ddl.trim(),
    notes?.trim() ?? "",
    "Data inventory (real values in the database):",
    inventory,
    [
      "Rules for each question:",
      "- Say exactly which rows count and what to return: which columns in which order, any rounding (say 'rounded to 2 decimals'), and the row order with a tie-breaker when order matters.",
      "- For money totals say whether discount and shipping are included.",
      "- 1 to 3 sentences, 20 to 700 characters. Use real values from the inventory.",
      "Rules for each gold query:",
      "- One SQLite SELECT (or WITH ... SELECT); never SELECT *.",
      "- It must return 1 to 50 rows, not empty and not all NULL.",
      "- Every ORDER BY ends with a unique tie-breaker.",
      'Answer with only a JSON array of objects {"question": "...", "sql": "..."}.',
    ].join("\n"),
  ]
    .filter((s) => s !== "")
    .join("\n\n");
}

/** The user message of one request. */
export function teacherUserPrompt(n: number, archetype: Archetype, difficulty: Level, style: Style, avoid: string[]): string {
  const parts = [
    `Write ${n} new tasks.`,
    `Archetype: ${ARCHETYPE_TEXT[archetype]}.`,
    `Difficulty: ${difficulty} (${DIFFICULTY_TEXT[difficulty]}).`,
    `Question style: ${STYLE_TEXT[style]}.`,
  ];
  if (avoid.length) parts.push(`Do not repeat or paraphrase these existing questions:\n${avoid.map((q) => `- ${q}`).join("\n")}`);
  return parts.join("\n");
}

/** The {question, sql} pairs in a reply; a truncated array is salvaged up to its last complete object. */
export function parsePairs(reply: string): { question: string; sql: string }[] {
  const start = reply.indexOf("[");
  if (start < 0) return [];
  const body = reply.slice(start);
  let parsed: unknown;
  const end = body.lastIndexOf("]");
  try {
    parsed = JSON.parse(body.slice(0, end + 1));
  } catch {
    for (let i = body.lastIndexOf("}"); i > 0 && parsed === undefined; i = body.lastIndexOf("}", i - 1)) {
      try {
        parsed = JSON.parse(body.slice(0, i + 1) + "]");
      } catch {
        // keep cutting back to an earlier object end
      }
    }
  }
  if (!Array.isArray(parsed)) return [];
  return parsed.filter((p): p is { question: string; sql: string } => !!p && typeof p === "object" && typeof (p as { question?: unknown }).question === "string" && typeof (p as { sql?: unknown }).sql === "string");
}
