/**
 * Neighbor databases: perturbed copies of a database on which a correct query must still agree with the
 * gold. A query that matched by accident (a hard-coded answer, a wrong filter that happens to select the
 * same rows, a join that only works for this data) usually stops matching on a neighbor.
 *
 * Copy i (0-based) of a database is made deterministically from (content hash, seed, i):
 *  - rows are dropped (each with probability 0.2) only when nothing references them: no declared foreign
 *    key points at them, and (for databases without declared keys) no column named like the table's
 *    primary key column holds their key;
 *  - then, in every table, each non-key column has its values shuffled among the remaining rows. Key
 *    columns keep their values: primary keys, declared foreign keys (both ends), columns of UNIQUE
 *    indexes, and id-like columns ("id", "..._id", "...Id").
 * Every value of a column stays a value that column had, so NOT NULL and single-column CHECKs hold and
 * every key still points at an existing row. What does not survive are facts that tie columns together
 * (e.g. "shipped_at is NULL exactly when status is pending"): a candidate that relies on such a data
 * coincidence instead of the columns the question names will fail on neighbors; that is the point of the
 * check, and a reason it is off by default.
 *
 * Copies are cached on disk as <dir>/<sha16>-s<seed>-<i>.sqlite (written to a temporary name, then renamed),
 * so copy i is the same file whatever K is asked for.
 */
import Database from "better-sqlite3";
import { existsSync, mkdirSync } from "node:fs";
import { writeFileAtomic } from "../core/files.js";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { T2sError } from "../core/errors.js";
import { databaseHashSync, databaseState } from "../db/dbstate.js";
import { SeededRandom } from "../core/random.js";
import { openReadOnly } from "../db/connection.js";

/** Probability that an unreferenced row is dropped. */
const DROP_RATE = 0.2;

/** Default folder of cached neighbor copies (T2S_CACHE_DIR/neighbors, else under the system temp dir). */
export function defaultNeighborDir(): string {
  return join(process.env.T2S_CACHE_DIR ?? join(tmpdir(), "t2s-cache"), "neighbors");
}

/**
 * Returns the paths of the first `k` neighbor copies of `dbPath` for `seed`, creating missing ones. `sha`:
 * the database's content hash (lib/db/dbstate.ts) when the caller has it; the copies are named by it.
 */
export function neighborDatabases(dbPath: string, k: number, seed = 0, dir = defaultNeighborDir(), contentHash?: string): string[] {
  if (!Number.isInteger(k) || k < 0) throw new T2sError("bad_neighbors", `neighbors must be an integer >= 0, got ${k}`);
  if (!Number.isInteger(seed)) throw new T2sError("bad_neighbors", `neighbor seed must be an integer, got ${seed}`);
  if (k === 0) return [];
  const sha = contentHash ?? databaseHashSync(databaseState(dbPath));
  const paths = [...Array(k).keys()].map((i) => join(dir, `${sha.slice(0, 16)}-s${seed}-${i}.sqlite`));
  const missing = paths.map((p, i) => [p, i] as const).filter(([p]) => !existsSync(p));
  if (missing.length === 0) return paths;
  mkdirSync(dir, { recursive: true });
  const src = openReadOnly(dbPath);
  const image = src.serialize();
  src.close();
  for (const [path, i] of missing) {
    const db = new Database(image);
    try {
      perturb(db, hashSeed(sha, seed, i));
      writeFileAtomic(path, db.serialize());
    } finally {
      db.close();
    }
  }
  return paths;
}

function hashSeed(sha: string, seed: number, i: number): number {
  let h = (parseInt(sha.slice(0, 8), 16) ^ Math.imul(seed + 1, 0x9e3779b9) ^ Math.imul(i + 1, 0x85ebca6b)) >>> 0;
  h = Math.imul(h ^ (h >>> 16), 0x7feb352d) >>> 0;
  return (h ^ (h >>> 15)) >>> 0;
}


interface TableInfo {
  name: string;
  columns: string[];
  pk: string[];
  keys: Set<string>;
}

const q = (name: string) => `"${name.replace(/"/g, '""')}"`;
const ID_LIKE = /^id$|_id$|[a-z0-9]Id$/;

/** Perturbs an open (in-memory) database in place. */
export function perturb(db: Database.Database, seed: number): void {
  const rand = new SeededRandom(seed);
  // integers beyond 2^53 must survive the shuffle unchanged
  db.defaultSafeIntegers(true);
  db.pragma("foreign_keys = OFF");
  db.pragma("ignore_check_constraints = ON");
  const tables = (db.prepare("SELECT name, sql FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' ORDER BY name").all() as { name: string; sql: string | null }[])
    .filter((t) => t.sql !== null && !/^\s*create\s+virtual/i.test(t.sql) && !/without\s+rowid/i.test(t.sql));
  const info = new Map<string, TableInfo>();
  for (const t of tables) {
    // safe-integer mode makes the PRAGMA's numbers bigints too: Number() them before any arithmetic
    const cols = db.prepare(`PRAGMA table_info(${q(t.name)})`).all() as { name: string; pk: number | bigint }[];
    const pk = cols.filter((c) => Number(c.pk) > 0).sort((a, b) => Number(a.pk) - Number(b.pk)).map((c) => c.name);
    const keys = new Set<string>([...pk, ...cols.filter((c) => ID_LIKE.test(c.name)).map((c) => c.name)]);
    for (const idx of db.prepare(`PRAGMA index_list(${q(t.name)})`).all() as { name: string; unique: number | bigint }[]) {
      if (!Number(idx.unique)) continue;
      for (const c of db.prepare(`PRAGMA index_info(${q(idx.name)})`).all() as { name: string | null }[]) if (c.name) keys.add(c.name);
    }
    info.set(t.name, { name: t.name, columns: cols.map((c) => c.name), pk, keys });
  }
  // references: parent table -> list of (parent columns, child table, child columns)
  const refs: { parent: string; pcols: string[]; child: string; ccols: string[] }[] = [];
  for (const t of info.values()) {
    const fks = (db.prepare(`PRAGMA foreign_key_list(${q(t.name)})`).all() as { id: number | bigint; seq: number | bigint; table: string; from: string; to: string | null }[])
      .map((fk) => ({ ...fk, id: Number(fk.id), seq: Number(fk.seq) }));
    const byId = new Map<number, typeof fks>();
    for (const fk of fks) byId.set(fk.id, [...(byId.get(fk.id) ?? []), fk]);
    for (const group of byId.values()) {
      const parent = info.get(group[0].table) ?? [...info.values()].find((x) => x.name.toLowerCase() === group[0].table.toLowerCase());
      if (!parent) continue;
      group.sort((a, b) => a.seq - b.seq);
      const pcols = group.every((g) => g.to) ? group.map((g) => g.to as string) : parent.pk;
      const ccols = group.map((g) => g.from);
      for (const c of ccols) t.keys.add(c);
      for (const c of pcols) parent.keys.add(c);
      refs.push({ parent: parent.name, pcols, child: t.name, ccols });
    }
  }
  // undeclared references: a column elsewhere named like a single-column primary key (not just "id")
  for (const parent of info.values()) {
    if (parent.pk.length !== 1 || parent.pk[0].toLowerCase() === "id") continue;
    for (const child of info.values()) {
      if (child === parent) continue;
      const col = child.columns.find((c) => c.toLowerCase() === parent.pk[0].toLowerCase());
      if (col) refs.push({ parent: parent.name, pcols: parent.pk, child: child.name, ccols: [col] });
    }
  }
  const apply = db.transaction(() => {
    for (const t of info.values()) dropRows(db, t, refs.filter((r) => r.parent === t.name), rand);
    for (const t of info.values()) shuffleColumns(db, t, rand);
  });
  apply();
}

function dropRows(db: Database.Database, t: TableInfo, refs: { pcols: string[]; child: string; ccols: string[] }[], rand: SeededRandom): void {
  const referenced = refs.map((r) => {
    const rows = db.prepare(`SELECT DISTINCT ${r.ccols.map(q).join(", ")} FROM ${q(r.child)}`).raw(true).all() as unknown[][];
    return { pcols: r.pcols, set: new Set(rows.map(tupleKey)) };
  });
  const wanted = [...new Set(referenced.flatMap((r) => r.pcols))];
  const select = `SELECT rowid${wanted.length ? ", " + wanted.map(q).join(", ") : ""} FROM ${q(t.name)} ORDER BY rowid`;
  const del = db.prepare(`DELETE FROM ${q(t.name)} WHERE rowid = ?`);
  for (const row of db.prepare(select).raw(true).all() as unknown[][]) {
    const isReferenced = referenced.some((r) => r.set.has(tupleKey(r.pcols.map((c) => row[1 + wanted.indexOf(c)]))));
    // draw for every row, so one row's fate does not shift the stream for the others
    const drop = rand.chance(DROP_RATE);
    if (drop && !isReferenced) del.run(row[0] as never);
  }
}

/** A hashable key of a tuple of SQLite values (integers arrive as BigInt in safe-integer mode). */
function tupleKey(values: unknown[]): string {
  return values.map((v) => (typeof v === "bigint" ? `i${v}` : typeof v === "number" ? (Number.isInteger(v) ? `i${v}` : `r${v}`) : Buffer.isBuffer(v) ? `b${v.toString("hex")}` : v === null ? "n" : `s${String(v)}`)).join("\u0000");
}

function shuffleColumns(db: Database.Database, t: TableInfo, rand: SeededRandom): void {
  const rowids = (db.prepare(`SELECT rowid FROM ${q(t.name)} ORDER BY rowid`).raw(true).all() as unknown[][]).map((r) => r[0]);
  if (rowids.length < 2) return;
  for (const col of t.columns) {
    if (t.keys.has(col)) continue;
    const values = rand.shuffle((db.prepare(`SELECT ${q(col)} FROM ${q(t.name)} ORDER BY rowid`).raw(true).all() as unknown[][]).map((r) => r[0]));
    const upd = db.prepare(`UPDATE ${q(t.name)} SET ${q(col)} = ? WHERE rowid = ?`);
    rowids.forEach((id, i) => upd.run(values[i] as never, id as never));
  }
}
