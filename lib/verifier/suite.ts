/**
 * Test-suite databases (test-suite-sql-eval's "distilled" neighbour databases): for a task on db_id X, every
 * file under <suite dir>/X/ whose name contains ".sqlite", as the official evaluator lists them, in name
 * order. A match must hold on each of them, besides the task's own database.
 */
import { existsSync, readdirSync, statSync } from "node:fs";
import { basename, dirname, extname, join, resolve } from "node:path";
import { T2sError } from "../core/errors.js";

/** The db_id of a database path: Spider's layout <db_id>/<db_id>.sqlite, else the file name without extension. */
export function dbIdOf(dbPath: string): string {
  return basename(dbPath, extname(dbPath)) || basename(dirname(dbPath));
}

/** The test-suite database files of `dbId` under `suiteDir` (throws when the folder has none for it). */
export function suiteDatabases(suiteDir: string, dbId: string): string[] {
  const dir = resolve(suiteDir, dbId);
  if (!existsSync(dir) || !statSync(dir).isDirectory()) {
    throw new T2sError("no_database", `no test-suite databases for '${dbId}': ${dir} is not a folder (expected <suite dir>/<db_id>/*.sqlite)`);
  }
  const files = readdirSync(dir).filter((n) => n.includes(".sqlite") && statSync(join(dir, n)).isFile()).sort();
  if (files.length === 0) throw new T2sError("no_database", `no test-suite databases for '${dbId}': ${dir} holds no .sqlite file`);
  return files.map((n) => join(dir, n));
}
