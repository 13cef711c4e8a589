/**
 * Read-only SQLite connections, cached per database file. A cached connection is reopened when the file
 * on disk changes (inode, size or mtime, and its -wal file's), so a rebuilt database is never read through
 * stale pages. A WAL-mode database is read from an in-memory image, since SQLite itself would create
 * -wal and -shm files beside it (and cannot open it at all on read-only storage).
 */
import Database from "better-sqlite3";
import { closeSync, copyFileSync, existsSync, mkdtempSync, openSync, readFileSync, readSync, rmSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { ExecError } from "./types.js";

/** Page cache per connection in KiB (SQLite's negative cache_size form). */
const CACHE_KIB = 8 * 1024;
/**
 * Prepared statements kept per connection; graders and benchmarks repeat the same SQL (a task set's golds,
 * k samples per task). Preparing a statement and checking its bytecode costs as much as running a typical
 * query, so the cache holds a whole evaluation set's worth; a statement is a few KiB.
 */
const STATEMENT_CACHE = 2048;
/** Open connections kept per process. */
const CONNECTION_CACHE = 32;

export interface CachedConnection {
  db: Database.Database;
  signature: string;
  statements: Map<string, Database.Statement>;
  /** The schema holds views, triggers, virtual tables or generated columns: code the query text does not
   * show may run, so every statement's bytecode is checked (allowlist.ts checkPrepared). */
  schemaRunsCode: boolean;
}

/**
 * Whether reading this database can run SQL that is not in the query's own text: views (their bodies run),
 * triggers, virtual tables (module code) and generated columns (their expressions).
 */
function schemaRunsCode(db: Database.Database): boolean {
  const objects = db.prepare("SELECT count(*) FROM sqlite_master WHERE type IN ('view', 'trigger') OR (type = 'table' AND sql LIKE 'CREATE VIRTUAL%')").pluck().get() as number;
  if (objects > 0) return true;
  const generated = db.prepare("SELECT count(*) FROM sqlite_master AS m, pragma_table_xinfo(m.name) AS c WHERE m.type = 'table' AND c.hidden IN (2, 3)").pluck().get() as number;
  return generated > 0;
}

/** Thrown by `ConnectionCache.get` with the error to report to the caller. */
export class ConnectionError extends Error {
  readonly error: ExecError;
  constructor(error: ExecError) {
    super(error.message);
    this.error = error;
  }
}

function fileSignature(path: string): string {
  let st;
  try {
    st = statSync(path);
  } catch {
    throw new ConnectionError({ kind: "no_database", message: `no database file at ${path}` });
  }
  if (!st.isFile()) throw new ConnectionError({ kind: "no_database", message: `${path} is not a file` });
  // SQLite would open an empty file as an empty database; an empty file is a missing database in practice.
  if (st.size === 0) throw new ConnectionError({ kind: "no_database", message: `${path} is empty (0 bytes), not a database` });
  let wal = "";
  try {
    const w = statSync(`${path}-wal`);
    wal = `:${w.ino}:${w.size}:${w.mtimeMs}`;
  } catch {
    // no -wal file: the usual case
  }
  return `${st.dev}:${st.ino}:${st.size}:${st.mtimeMs}${wal}`;
}

/** Whether the database header says WAL mode (bytes 18 and 19, the file format versions, are 2). */
function isWalMode(path: string): boolean {
  const header = Buffer.alloc(20);
  const fd = openSync(path, "r");
  try {
    if (readSync(fd, header, 0, 20, 0) < 20) return false;
  } finally {
    closeSync(fd);
  }
  return header.toString("latin1", 0, 16) === "SQLite format 3\u0000" && (header[18] === 2 || header[19] === 2);
}

/**
 * The bytes of a WAL-mode database as one rollback-mode image: the file itself, or, when committed pages
 * still sit in its -wal file, what SQLite reads from a private copy of both (made and removed here, never
 * beside the original). The header is set to rollback mode, as an in-memory database requires.
 */
function walImage(path: string): Buffer {
  const wal = `${path}-wal`;
  let image: Buffer;
  if (existsSync(wal) && statSync(wal).size > 0) {
    const dir = mkdtempSync(join(tmpdir(), "t2s-wal-"));
    try {
      copyFileSync(path, join(dir, "db"));
      copyFileSync(wal, join(dir, "db-wal"));
      const copy = new Database(join(dir, "db"), { fileMustExist: true });
      try {
        image = copy.serialize();
      } finally {
        copy.close();
      }
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  } else image = readFileSync(path);
  image[18] = 1;
  image[19] = 1;
  return image;
}

/**
 * Opens `path` read-only with every defence the driver offers: read-only open of an existing file (a WAL-mode
 * database from its in-memory image, so no -wal or -shm file is created beside it),
 * query_only, untrusted schema (views cannot call functions with side effects), memory temp store (no
 * temp files on disk), no mmap, defensive mode (better-sqlite3 keeps it on unless unsafe mode is set).
 */
export function openReadOnly(path: string): Database.Database {
  let db: Database.Database;
  try {
    db = isWalMode(path) ? new Database(walImage(path), { readonly: true }) : new Database(path, { readonly: true, fileMustExist: true, timeout: 2000 });
  } catch (e) {
    throw new ConnectionError({ kind: "no_database", message: `cannot open ${path} as a SQLite database: ${(e as Error).message}` });
  }
  try {
    db.unsafeMode(false);
    db.pragma("query_only = 1");
    db.pragma("trusted_schema = 0");
    db.pragma(`cache_size = -${CACHE_KIB}`);
    db.pragma("temp_store = MEMORY");
    db.pragma("mmap_size = 0");
    db.pragma("cell_size_check = 1");
    // Reading the schema now turns "not a database" into an open error rather than a query error.
    db.prepare("SELECT count(*) FROM sqlite_master").get();
  } catch (e) {
    db.close();
    throw new ConnectionError({ kind: "no_database", message: `${path} is not a readable SQLite database: ${(e as Error).message}` });
  }
  return db;
}

/** Read-only connections per database path, least recently used dropped first. */
export class ConnectionCache {
  private readonly entries = new Map<string, CachedConnection>();

  /** The open connection for `path`, reopened if the file changed since it was opened. */
  get(path: string): CachedConnection {
    const signature = fileSignature(path);
    const hit = this.entries.get(path);
    if (hit) {
      this.entries.delete(path);
      if (hit.signature === signature) {
        this.entries.set(path, hit);
        return hit;
      }
      hit.db.close();
    }
    const db = openReadOnly(path);
    let runsCode = true;
    try {
      runsCode = schemaRunsCode(db);
    } catch {
      // a schema that cannot be listed is treated as one that runs code: every statement is checked
    }
    const entry: CachedConnection = { db, signature, statements: new Map(), schemaRunsCode: runsCode };
    this.entries.set(path, entry);
    while (this.entries.size > CONNECTION_CACHE) {
      const [oldest, conn] = this.entries.entries().next().value as [string, CachedConnection];
      conn.db.close();
      this.entries.delete(oldest);
    }
    return entry;
  }

  /** Remembers a prepared statement that passed the policy, dropping the oldest beyond the cap. */
  remember(conn: CachedConnection, sql: string, stmt: Database.Statement): void {
    conn.statements.set(sql, stmt);
    if (conn.statements.size > STATEMENT_CACHE) {
      const oldest = conn.statements.keys().next().value as string;
      conn.statements.delete(oldest);
    }
  }

  /** Closes every connection. */
  close(): void {
    for (const conn of this.entries.values()) conn.db.close();
    this.entries.clear();
  }
}
