/**
 * Which statements may run. The rule is: exactly one read-only query (SELECT, WITH ... SELECT or VALUES).
 * SQLite itself is the main judge (better-sqlite3 prepares only one statement and refuses a non-empty
 * tail; `stmt.readonly` and `stmt.reader` come from sqlite3_stmt_readonly and the column count; the
 * compiled bytecode lists every function the statement calls). The lexical checks in front of it only
 * give clearer messages and catch names SQLite would accept but the sandbox must not (ATTACH, BEGIN and
 * some PRAGMAs count as "read-only" to SQLite because they do not change the file).
 */
import type Database from "better-sqlite3";
import type { ExecError } from "./types.js";
import { codeTokens } from "./sqltext.js";

/** Longest SQL text accepted; real queries are far shorter, and a huge text is itself an attack. */
export const MAX_SQL_LENGTH = 100_000;

const QUERY_STARTS = new Set(["SELECT", "WITH", "VALUES"]);

/** Statement keywords that name a class of forbidden statement, for the message. */
const FORBIDDEN_STARTS: Record<string, string> = {
  INSERT: "writes (INSERT)",
  UPDATE: "writes (UPDATE)",
  DELETE: "writes (DELETE)",
  REPLACE: "writes (REPLACE)",
  UPSERT: "writes",
  CREATE: "schema changes (CREATE)",
  DROP: "schema changes (DROP)",
  ALTER: "schema changes (ALTER)",
  ATTACH: "ATTACH (opening other files)",
  DETACH: "DETACH",
  PRAGMA: "PRAGMA statements",
  VACUUM: "VACUUM",
  REINDEX: "REINDEX",
  ANALYZE: "ANALYZE",
  BEGIN: "transaction control (BEGIN)",
  COMMIT: "transaction control (COMMIT)",
  END: "transaction control (END)",
  ROLLBACK: "transaction control (ROLLBACK)",
  SAVEPOINT: "transaction control (SAVEPOINT)",
  RELEASE: "transaction control (RELEASE)",
  EXPLAIN: "EXPLAIN",
};

/**
 * Functions a query may not call: extension loading, file access (present in some SQLite builds and
 * shells), pointer-leaking or internal-state interfaces. Only a name followed by "(" counts, so a column
 * that happens to be called `edit` or `eval` is not refused; the compiled bytecode is checked as well.
 */
const DENIED_FUNCTIONS = new Set([
  "load_extension",
  "fts3_tokenizer",
  "fts5_source_id",
  "readfile",
  "writefile",
  "edit",
  "lsmode",
  "sqlar_compress",
  "sqlar_uncompress",
  "sqlite_compileoption_get",
  "sqlite_compileoption_used",
  "shell_add_schema",
  "shell_escape_crnl",
  "shell_idquote",
  "shell_int32",
  "shell_module_schema",
  "shell_putsnl",
  "eval",
]);

/** Virtual tables that expose pages, files or internal state; refused wherever the name appears. */
const DENIED_TABLES = new Set([
  "fts3tokenize",
  "fts5vocab",
  "fsdir",
  "zipfile",
  "zipfile_cds",
  "sqlite_dbpage",
  "sqlite_dbdata",
  "sqlite_dbptr",
  "sqlite_stmt",
  "sqlite_memstat",
  "dbstat",
]);

/** Table-valued PRAGMA functions that only describe the schema, which query writers legitimately use. */
const ALLOWED_PRAGMA_FUNCTIONS = new Set([
  "pragma_table_info",
  "pragma_table_xinfo",
  "pragma_table_list",
  "pragma_index_list",
  "pragma_index_info",
  "pragma_index_xinfo",
  "pragma_foreign_key_list",
]);

/** Opcodes that only appear in statements that write or change the connection. */
const WRITE_OPCODES = new Set([
  "OpenWrite",
  "VUpdate",
  "VCreate",
  "VDestroy",
  "VBegin",
  "ParseSchema",
  "Vacuum",
  "IncrVacuum",
  "JournalMode",
  "Destroy",
  "Clear",
  "CreateBtree",
  "DropTable",
  "DropIndex",
  "DropTrigger",
  "SqlExec",
  "LoadAnalysis",
  "Expire",
  "AutoCommit",
  "Savepoint",
]);

function unsafe(message: string): ExecError {
  return { kind: "unsafe", message };
}

const ONLY_QUERIES = "only one read-only query (SELECT, WITH ... SELECT or VALUES) may run";

function deniedName(name: string, called: boolean): string | undefined {
  const n = name.toLowerCase();
  if (DENIED_TABLES.has(n)) return n;
  if (called && DENIED_FUNCTIONS.has(n)) return n;
  if (n.startsWith("pragma_") && !ALLOWED_PRAGMA_FUNCTIONS.has(n)) return n;
  return undefined;
}

/**
 * Checks SQL text before it reaches SQLite. Returns the error to report, or null when SQLite should
 * judge it next.
 */
export function checkSqlText(sql: string): ExecError | null {
  if (typeof sql !== "string") return { kind: "syntax", message: "the SQL must be a string" };
  if (sql.length > MAX_SQL_LENGTH) {
    return { kind: "too_large", message: `the SQL text is ${sql.length} characters; the limit is ${MAX_SQL_LENGTH}` };
  }
  // SQLite stops reading at a NUL byte, so text after one would be silently ignored: refuse it instead.
  if (sql.includes("\u0000")) return unsafe("the SQL contains a NUL character");
  const tokens = codeTokens(sql);
  if (tokens.length === 0 || tokens.every((t) => t.type === "punct" && t.text === ";")) {
    return { kind: "syntax", message: "no SQL statement was given" };
  }
  const first = tokens[0];
  const head = first.type === "word" ? first.text.toUpperCase() : "";
  if (!QUERY_STARTS.has(head)) {
    const what = FORBIDDEN_STARTS[head];
    if (what) return unsafe(`${what} not allowed: ${ONLY_QUERIES}`);
    // Anything else is not a statement SQLite knows; let it say why (a syntax error).
  }
  for (let i = 0; i < tokens.length; i++) {
    const t = tokens[i];
    if (t.type !== "word" && t.type !== "quoted") continue;
    const next = tokens[i + 1];
    const denied = deniedName(t.text, next !== undefined && next.type === "punct" && next.text === "(");
    if (denied) return unsafe(`the function or table '${denied}' is not allowed in the sandbox`);
  }
  // A semicolon followed by more code is a second statement; SQLite refuses it too, this names it.
  const semi = tokens.findIndex((t) => t.type === "punct" && t.text === ";");
  if (semi >= 0 && tokens.slice(semi + 1).some((t) => !(t.type === "punct" && t.text === ";"))) {
    return unsafe(`more than one statement: ${ONLY_QUERIES}`);
  }
  return null;
}

/**
 * Checks a statement SQLite has prepared: it must return rows, must not write, and its bytecode must call
 * no denied function and use no writing opcode. Returns the error to report, or null when it may run.
 * With `schemaRunsCode` false (no views, triggers, virtual tables or generated columns: connection.ts) the
 * bytecode can only call what the text names, which checkSqlText has already checked, and a read-only
 * query uses no writing opcode, so the EXPLAIN pass (as costly as preparing the query again) is skipped.
 */
export function checkPrepared(db: Database.Database, stmt: Database.Statement, sql: string, schemaRunsCode = true): ExecError | null {
  if (!stmt.reader) return unsafe(`the statement returns no rows: ${ONLY_QUERIES}`);
  if (!stmt.readonly) return unsafe(`the statement writes to the database: ${ONLY_QUERIES}`);
  if (!schemaRunsCode) return null;
  // raw rows (addr, opcode, p1, p2, p3, p4, ...): no object per opcode, a third of the check's cost
  const program = db.prepare(`EXPLAIN ${sql}`).raw(true).all() as unknown[][];
  for (const row of program) {
    const opcode = row[1] as string;
    const p4 = row[5];
    if (WRITE_OPCODES.has(opcode)) return unsafe(`the statement would change the database or connection (${opcode}): ${ONLY_QUERIES}`);
    if (typeof p4 === "string" && /Func|Agg/.test(opcode)) {
      const name = p4.replace(/\(.*$/, "");
      const denied = deniedName(name, true);
      if (denied) return unsafe(`the function '${denied}' is not allowed in the sandbox`);
    }
  }
  return null;
}
