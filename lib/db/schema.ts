/**
 * Database schema as DDL text for prompts. SQLite keeps each CREATE statement exactly as written in
 * sqlite_master, comments included, so column comments come straight from there; the statement is
 * re-laid out one column per line, with the column's comment (and optionally a few sample values) after it.
 */
import type Database from "better-sqlite3";
import { ConnectionError, openReadOnly } from "./connection.js";
import { T2sError } from "../core/errors.js";
import { tokenize, type Token } from "./sqltext.js";

export interface SchemaOptions {
  /** Up to this many distinct non-NULL example values per column (0 = none, the default). */
  sampleValues?: number;
  /** Only these tables and views (default: every one); a name the database lacks is an error ("unknown_table"). */
  tables?: string[];
}

interface Definition {
  text: string;
  comments: string[];
}

/** Splits a CREATE TABLE statement into its head, its column/constraint definitions and their comments. */
export function splitCreateTable(sql: string): { head: string; defs: Definition[]; tail: string } | undefined {
  const tokens = tokenize(sql);
  const open = tokens.findIndex((t) => t.type === "punct" && t.text === "(");
  if (open < 0) return undefined;
  const lineOf = (pos: number) => sql.slice(0, pos).split("\n").length;
  const defs: Definition[] = [];
  let current: Token[] = [];
  let pendingComments: string[] = [];
  let depth = 0;
  let close = -1;
  let lastCode: Token | undefined;
  let lastDef: Definition | undefined;
  const finish = () => {
    if (current.length === 0) return;
    const def: Definition = { text: sql.slice(current[0].start, current[current.length - 1].end), comments: pendingComments };
    pendingComments = [];
    defs.push(def);
    lastDef = def;
    current = [];
  };
  for (let i = open + 1; i < tokens.length; i++) {
    const t = tokens[i];
    if (t.type === "comment") {
      const text = t.text.trim();
      if (!text) continue;
      // A comment on the line where code ended belongs to that code; one on its own line to what follows.
      const trailing = lastCode !== undefined && lineOf(lastCode.end) === lineOf(t.start);
      if (trailing && current.length > 0) pendingComments.push(text);
      else if (trailing && lastDef) lastDef.comments.push(text);
      else pendingComments.push(text);
      continue;
    }
    lastCode = t;
    if (t.type === "punct" && t.text === "(") depth++;
    if (t.type === "punct" && t.text === ")") {
      if (depth === 0) {
        close = i;
        finish();
        break;
      }
      depth--;
    }
    if (depth === 0 && t.type === "punct" && t.text === ",") {
      finish();
      continue;
    }
    current.push(t);
  }
  if (close < 0) return undefined;
  if (pendingComments.length && lastDef) lastDef.comments.push(...pendingComments);
  return { head: sql.slice(0, tokens[open].start).trim(), defs, tail: sql.slice(tokens[close].end).trim() };
}

function quoteIdent(name: string): string {
  return `"${name.replace(/"/g, '""')}"`;
}

function formatSample(v: unknown): string {
  if (typeof v === "string") {
    const s = v.length > 40 ? `${v.slice(0, 37)}...` : v;
    return `'${s.replace(/'/g, "''").replace(/\s+/g, " ")}'`;
  }
  if (Buffer.isBuffer(v)) return "<blob>";
  return String(v);
}

function samplesFor(db: Database.Database, table: string, column: string, n: number): string[] {
  const sql = `SELECT DISTINCT ${quoteIdent(column)} AS v FROM (SELECT ${quoteIdent(column)} FROM ${quoteIdent(table)} LIMIT 10000) WHERE ${quoteIdent(column)} IS NOT NULL LIMIT ${n}`;
  try {
    return (db.prepare(sql).all() as { v: unknown }[]).map((r) => formatSample(r.v));
  } catch {
    return [];
  }
}

function columnName(defText: string): string | undefined {
  const first = tokenize(defText).find((t) => t.type !== "comment");
  if (!first) return undefined;
  if (first.type === "word" && /^(CONSTRAINT|PRIMARY|UNIQUE|CHECK|FOREIGN)$/i.test(first.text)) return undefined;
  return first.type === "word" || first.type === "quoted" || first.type === "string" ? first.text : undefined;
}

function tableDdl(db: Database.Database, name: string, sql: string, samples: number): string {
  const split = splitCreateTable(sql);
  if (!split) return `${sql.trim()};`;
  const info = db.prepare(`SELECT name, pk, type FROM pragma_table_info(?)`).all(name) as { name: string; pk: number; type: string }[];
  const pkCount = info.filter((c) => c.pk > 0).length;
  const lines = split.defs.map((def, i) => {
    const comma = i < split.defs.length - 1 ? "," : "";
    const notes = [...def.comments];
    const col = columnName(def.text);
    const meta = col ? info.find((c) => c.name.toLowerCase() === col.toLowerCase()) : undefined;
    const isRowidKey = meta !== undefined && meta.pk > 0 && pkCount === 1 && /^INTEGER$/i.test(meta.type);
    if (samples > 0 && meta && !isRowidKey) {
      const values = samplesFor(db, name, meta.name, samples);
      if (values.length) notes.push(`samples: ${values.join(", ")}`);
    }
    const text = def.text.replace(/\s*\n\s*/g, " ");
    return notes.length ? `  ${text}${comma} -- ${notes.join("; ")}` : `  ${text}${comma}`;
  });
  return `${split.head} (\n${lines.join("\n")}\n)${split.tail ? ` ${split.tail}` : ""};`;
}

/** DDL for a database already open; see schemaDdl. */
export function schemaDdlOf(db: Database.Database, opts: SchemaOptions = {}): string {
  const samples = opts.sampleValues ?? 0;
  if (!Number.isInteger(samples) || samples < 0) throw new T2sError("usage", `sampleValues must be an integer >= 0, got ${samples}`);
  const rows = db
    .prepare("SELECT type, name, sql FROM sqlite_master WHERE type IN ('table', 'view') AND name NOT LIKE 'sqlite_%' AND sql IS NOT NULL ORDER BY rowid")
    .all() as { type: string; name: string; sql: string }[];
  const wanted = opts.tables ? new Set(opts.tables.map((t) => t.toLowerCase())) : undefined;
  const unknown = (opts.tables ?? []).filter((t) => !rows.some((r) => r.name.toLowerCase() === t.toLowerCase()));
  if (unknown.length) {
    throw new T2sError("unknown_table", `no table or view named ${unknown.map((t) => `'${t}'`).join(", ")} in ${db.name}; it has ${rows.map((r) => r.name).join(", ") || "none"}`);
  }
  const parts: string[] = [];
  for (const r of rows) {
    if (wanted && !wanted.has(r.name.toLowerCase())) continue;
    if (r.type === "view") parts.push(`${r.sql.trim()};`);
    else if (/^CREATE\s+VIRTUAL/i.test(r.sql)) parts.push(`${r.sql.trim()};`);
    else parts.push(tableDdl(db, r.name, r.sql, samples));
  }
  return parts.join("\n\n") + "\n";
}

/** Runs `fn` on a database file opened read-only, closing it after; a file that cannot be opened is T2sError("no_database"). */
function withDatabase<T>(dbPath: string, fn: (db: Database.Database) => T): T {
  let db: Database.Database;
  try {
    db = openReadOnly(dbPath);
  } catch (e) {
    if (e instanceof ConnectionError) throw new T2sError("no_database", e.message);
    throw e;
  }
  try {
    return fn(db);
  } finally {
    db.close();
  }
}

/** The CREATE TABLE (and CREATE VIEW) text of a database file for prompts: keys, types, column comments, optional sample values. */
export function schemaDdl(dbPath: string, opts: SchemaOptions = {}): string {
  return withDatabase(dbPath, (db) => schemaDdlOf(db, opts));
}

/** The columns of every table of a database file, lower-cased table name -> column names in order. */
export function tableColumns(dbPath: string): Map<string, string[]> {
  return withDatabase(dbPath, (db) => {
    const tables = db.prepare("SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' ORDER BY rowid").all() as { name: string }[];
    const out = new Map<string, string[]>();
    for (const t of tables) out.set(t.name.toLowerCase(), (db.prepare("SELECT name FROM pragma_table_info(?)").all(t.name) as { name: string }[]).map((c) => c.name));
    return out;
  });
}
