/**
 * Read-only SQLite connections, cached per database file. A cached connection is reopened when the file
 * on disk changes (inode, size or mtime, and its -wal file's), so a rebuilt database is never read through
 * stale pages. A WAL-mode database is read through SQLite's own read path, never a copy or an image of the
 * file, and nothing is created beside it (it reads on read-only storage too), in one of three ways:
 *  - with its -wal and -shm files present (a writer has it open, or crashed): opened as SQLite opens it,
 *    read-only; the -shm's locks give every query one committed snapshot, whatever a writer does meanwhile;
 *  - with a -wal file but no -shm (no writer can be sharing it): SQLite's unix-none VFS in exclusive
 *    locking mode, so the -wal index lives in this process's memory and no -shm is made;
 *  - with no -wal (or an empty one): `immutable=1`, the main file alone.
 * The last two take no locks, so a query's answer is kept only when the files did not change while it ran
 * (runQuery checks, and reads again). Pages are read on demand, so a database of any size can be opened.
 */
import Database from "better-sqlite3";
import { closeSync, constants, existsSync, openSync, readSync, statSync } from "node:fs";
import { isExact, notOpenedExactly, openDescriptors } from "./exact.js";
import type { ExecError } from "./types.js";

// SQLite reads "file:" names as URIs (immutable=1, vfs=unix-none) only when this is set before the driver
// first loads; nothing in the kit opens a database before this module is evaluated.
process.env.SQLITE_USE_URI ??= "1";

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

/** How a database file is opened (see the module comment). */
export type ReadMode = "rollback" | "shared" | "private" | "immutable";

export interface CachedConnection {
  db: Database.Database;
  signature: string;
  /** How it was opened. "private" and "immutable" take no locks: an answer holds only if the files did not
   * change meanwhile. A "shared" one is closed after each query, so a reader never holds a live database
   * open between queries (a writer's last close can then checkpoint and remove its -wal and -shm as usual). */
  mode: ReadMode;
  /** Verified to read exactly its path (lib/db/exact.ts). */
  exact: boolean;
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
  // a -shm file appearing (a writer opened the database) changes how it must be read
  const shm = existsSync(`${path}-shm`) ? ":shm" : "";
  return `${st.dev}:${st.ino}:${st.size}:${st.mtimeMs}${wal}${shm}`;
}

/** The signature of the files now, or null when they are gone (for the check after an unlocked read). */
export function currentSignature(path: string): string | null {
  try {
    return fileSignature(path);
  } catch {
    return null;
  }
}

/** Whether the database header says WAL mode (bytes 18 and 19, the file format versions, are 2). */
function isWalMode(path: string): boolean {
  const header = Buffer.alloc(20);
  // non-blocking: a FIFO put where a database is expected must not hold the process in open()
  const fd = openSync(path, constants.O_RDONLY | constants.O_NONBLOCK);
  try {
    if (readSync(fd, header, 0, 20, 0) < 20) return false;
  } finally {
    closeSync(fd);
  }
  return header.toString("latin1", 0, 16) === "SQLite format 3\u0000" && (header[18] === 2 || header[19] === 2);
}

/** `path` as a SQLite URI path (%, ? and # escaped, the rest as written). */
function uriPath(path: string): string {
  return path.replace(/[%?#]/g, (c) => `%${c.charCodeAt(0).toString(16).padStart(2, "0")}`);
}

let urisChecked = false;

/**
 * Throws unless SQLite reads "file:" names as URIs in this process (SQLITE_USE_URI was set before the driver
 * loaded): without them a WAL-mode database cannot be opened without creating files beside it.
 */
function requireUris(): void {
  if (urisChecked) return;
  try {
    new Database("file:/t2s-uri-probe?vfs=t2s-no-such-vfs", { readonly: true }).close();
  } catch (e) {
    if (!/no such vfs/i.test((e as Error).message)) {
      throw new Error("SQLite URI filenames are off in this process (better-sqlite3 was loaded before lib/db/connection.ts set SQLITE_USE_URI=1); start it with SQLITE_USE_URI=1");
    }
  }
  urisChecked = true;
}

/** How the database at `path` is opened now (see the module comment). */
export function readMode(path: string): ReadMode {
  if (!isWalMode(path)) return "rollback";
  let walSize = -1;
  try {
    walSize = statSync(`${path}-wal`).size;
  } catch {
    walSize = -1;
  }
  if (walSize >= 0 && existsSync(`${path}-shm`)) return "shared";
  return walSize > 0 ? "private" : "immutable";
}

/**
 * Opens `path` read-only with every defence the driver offers: read-only open of an existing file (a WAL-mode
 * database as readMode says, so no -wal or -shm file is created beside it), query_only, untrusted schema
 * (views cannot call functions with side effects), memory temp store (no temp files on disk), no mmap,
 * defensive mode (better-sqlite3 keeps it on unless unsafe mode is set).
 */
export function openReadOnly(path: string): Database.Database {
  return openChecked(path, isExact(path)).db;
}

/**
 * Opens `path` as openReadOnly does; with `exact`, refuses (no_database) unless every file SQLite opened for it
 * is that very path, its -wal or -shm, with no symbolic link anywhere (lib/db/exact.ts).
 */
function openChecked(path: string, exact: boolean): { db: Database.Database; mode: ReadMode } {
  let mode: ReadMode;
  try {
    mode = readMode(path);
  } catch (e) {
    throw new ConnectionError({ kind: "no_database", message: `cannot open ${path} as a SQLite database: ${(e as Error).message}` });
  }
  const before = exact ? openDescriptors() : null;
  const db = openIn(path, mode);
  if (exact) {
    const why = notOpenedExactly(path, before);
    if (why !== null) {
      db.close();
      throw new ConnectionError({ kind: "no_database", message: `${path} was not opened where it was checked (${why}); it changed since, so it is not read` });
    }
  }
  return { db, mode };
}

function openIn(path: string, mode: ReadMode): Database.Database {
  let db: Database.Database;
  try {
    if (mode === "private" || mode === "immutable") requireUris();
    const name = mode === "private" ? `file:${uriPath(path)}?vfs=unix-none` : mode === "immutable" ? `file:${uriPath(path)}?immutable=1` : path;
    db = new Database(name, { readonly: true, fileMustExist: true, timeout: 2000 });
  } catch (e) {
    throw new ConnectionError({ kind: "no_database", message: `cannot open ${path} as a SQLite database: ${(e as Error).message}` });
  }
  try {
    // before the first read: the -wal index then lives in this process's memory, and no -shm is made
    if (mode === "private") db.pragma("locking_mode = EXCLUSIVE");
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

  /**
   * The open connection for `path`, reopened if the file changed since it was opened; with `exact`, one
   * verified to read exactly that path (lib/db/exact.ts).
   */
  get(path: string, exact = isExact(path)): CachedConnection {
    const signature = fileSignature(path);
    const hit = this.entries.get(path);
    if (hit) {
      this.entries.delete(path);
      if (hit.signature === signature && (hit.exact || !exact)) {
        this.entries.set(path, hit);
        return hit;
      }
      hit.db.close();
    }
    const { db, mode } = openChecked(path, exact);
    let runsCode = true;
    try {
      runsCode = schemaRunsCode(db);
    } catch {
      // a schema that cannot be listed is treated as one that runs code: every statement is checked
    }
    const entry: CachedConnection = { db, signature, mode, exact, statements: new Map(), schemaRunsCode: runsCode };
    this.entries.set(path, entry);
    while (this.entries.size > CONNECTION_CACHE) {
      const [oldest, conn] = this.entries.entries().next().value as [string, CachedConnection];
      conn.db.close();
      this.entries.delete(oldest);
    }
    return entry;
  }

  /** Closes and forgets the connection of `path` (its files changed under an unlocked read, or it is live). */
  drop(path: string): void {
    const hit = this.entries.get(path);
    if (!hit) return;
    this.entries.delete(path);
    hit.db.close();
  }

  /** Closes the connection of `path` if it reads a live database ("shared"): no lock is held between queries. */
  releaseLive(path: string): void {
    if (this.entries.get(path)?.mode === "shared") this.drop(path);
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
