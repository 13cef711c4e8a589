/** The manifest written beside a task set: counts, the database hash and how the set was made. */
import { writeFileSync, renameSync } from "node:fs";
import { fileSha256 } from "../db/copies.js";
import { taskStats, type TaskStats } from "./stats.js";
import type { Task } from "./types.js";

export interface TaskManifest {
  name: string;
  db_id: string;
  /** Database path relative to the manifest's folder. */
  db_path: string;
  db_sha256: string;
  tasks_file: string;
  counts: Omit<TaskStats, "by_db">;
  made_by: Record<string, unknown>;
}

/** The manifest of a task set over one database. */
export function buildManifest(tasks: Task[], opts: { name: string; dbId: string; dbPath: string; dbPathInManifest: string; tasksFile: string; madeBy: Record<string, unknown> }): TaskManifest {
  const { by_db: _byDb, ...counts } = taskStats(tasks);
  void _byDb;
  return {
    name: opts.name,
    db_id: opts.dbId,
    db_path: opts.dbPathInManifest,
    db_sha256: fileSha256(opts.dbPath),
    tasks_file: opts.tasksFile,
    counts,
    made_by: opts.madeBy,
  };
}

/** Writes a manifest as pretty JSON (temp file renamed into place). */
export function writeManifest(path: string, manifest: TaskManifest): void {
  writeFileSync(`${path}.tmp`, JSON.stringify(manifest, null, 2) + "\n");
  renameSync(`${path}.tmp`, path);
}
