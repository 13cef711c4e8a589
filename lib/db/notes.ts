/**
 * The NOTES of a database: conventions and caveats the prompt shows beside the schema (how an order total
 * is computed, what a status means). Every prompt of the kit (benchmark, training, env server, task export,
 * teacher authoring) reads them here.
 */
import { existsSync, readFileSync } from "node:fs";
import { basename, dirname, extname, join } from "node:path";
import { shopNotes } from "./shop/build.js";

/** The notes of the databases the kit ships, by db_id: a copy of one anywhere keeps its notes. */
const SHIPPED_NOTES = new Map<string, () => string>([["shop", shopNotes]]);

/**
 * The NOTES text for a task's database: a shipped database's own notes (by db_id), else a NOTES file
 * beside the database (`<name>.notes.md`, `NOTES.md` or `NOTES` in its folder), else none.
 */
export function notesFor(task: { db_id: string; db_path: string }): string | undefined {
  const shipped = SHIPPED_NOTES.get(task.db_id);
  if (shipped) return shipped();
  const dir = dirname(task.db_path);
  const stem = basename(task.db_path, extname(task.db_path));
  for (const name of [`${stem}.notes.md`, "NOTES.md", "NOTES"]) {
    const p = join(dir, name);
    if (existsSync(p)) return readFileSync(p, "utf8");
  }
  return undefined;
}
