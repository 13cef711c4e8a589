/**
 * Execution dialects. "sqlite" runs SQL exactly as given. "spider" runs it as the Spider and BIRD
 * evaluation scripts do, on Python's sqlite3:
 *  - the evaluator's text normalisations first: "! =", "> =", "< =" become "!=", ">=", "<=" (Spider's and
 *    test-suite-sql-eval's postprocess() replace them in the raw text, and so does this);
 *  - double-quoted string literals are accepted where SQLite's legacy behaviour accepts them: a
 *    double-quoted token that names no column in scope is a string. better-sqlite3 12 builds SQLite with
 *    SQLITE_DQS=0 and exposes no sqlite3_db_config(SQLITE_DBCONFIG_DQS_DML) call, pragma or option to turn
 *    it back on, so the kit lets SQLite decide: it prepares the statement, and when SQLite answers
 *    `no such column: "X" - should this be a string literal in single-quotes?` (its message for exactly
 *    this case) the double-quoted tokens spelled "X" are rewritten to the string 'X' with the kit's lexer
 *    and the statement is prepared again. A token that does name a column stays an identifier, as in
 *    legacy SQLite. See environment.md for the measurements behind this choice.
 */
import { RESULT_ROWS } from "../core/defaults.js";
import { tokenize } from "./sqltext.js";

export type Dialect = "sqlite" | "spider";
export const DIALECTS: readonly Dialect[] = ["sqlite", "spider"];

/** Rewrites a query once, before it is prepared, as the dialect's evaluator does. */
export function normalizeForDialect(sql: string, dialect: Dialect | undefined): string {
  if (dialect !== "spider") return sql;
  return sql.replace(/> =/g, ">=").replace(/< =/g, "<=").replace(/! =/g, "!=");
}

const DQS_HINT = /^no such column: "([\s\S]*)" - should this be a string literal in single-quotes\?$/;

/** The double-quoted name SQLite could not resolve, when `message` is its DQS hint; else null. */
export function unresolvedDoubleQuoted(message: string): string | null {
  const m = DQS_HINT.exec(message);
  return m ? m[1] : null;
}

/**
 * `sql` with every double-quoted token whose name is `name` written as a single-quoted string; null when
 * there is none (so the caller stops retrying).
 */
export function doubleQuotedToString(sql: string, name: string): string | null {
  let out = "";
  let last = 0;
  for (const t of tokenize(sql)) {
    if (t.type !== "quoted" || sql[t.start] !== '"' || t.text !== name) continue;
    out += sql.slice(last, t.start) + `'${t.text.replace(/'/g, "''")}'`;
    last = t.end;
  }
  return last === 0 ? null : out + sql.slice(last);
}

/** Most rewrites tried for one statement (each is one more prepare); real queries need one or two. */
export const MAX_DQS_REWRITES = 32;

/**
 * The row cap a dialect grades with by default: the kit's 200, or for "spider" effectively none (the
 * official evaluators fetch every row; the result-size cap of the executor still bounds memory).
 */
export function defaultMaxRows(dialect: Dialect | undefined): number {
  return dialect === "spider" ? 1_000_000 : RESULT_ROWS;
}
