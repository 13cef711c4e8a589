/** Writing the shop task set and its manifest: the one step `t2s tasks author shop` runs. */
import { basename, dirname, relative, resolve } from "node:path";
import type { Executor } from "../../db/types.js";
import { kitVersion } from "../../core/paths.js";
import { writeTasks } from "../io.js";
import { buildManifest, writeManifest, type TaskManifest } from "../manifest.js";
import { authorShopTasks, DEFAULT_AUTHOR_SEED, type AuthorReport } from "./author.js";

export interface ShipOptions {
  dbPath: string;
  /** The tasks file; the manifest goes beside it as manifest.json. */
  out: string;
  seed?: number;
  executor: Executor;
  onProgress?: (phase: string, done: number, total: number) => void;
}

/** Authors the shop set and writes tasks + manifest; returns both with the author's report. */
export async function writeShopTaskSet(opts: ShipOptions): Promise<{ report: AuthorReport; manifest: TaskManifest; tasksPath: string; manifestPath: string }> {
  const seed = opts.seed ?? DEFAULT_AUTHOR_SEED;
  const dbPath = resolve(opts.dbPath);
  const tasksPath = resolve(opts.out);
  const report = await authorShopTasks(dbPath, { executor: opts.executor, seed, onProgress: opts.onProgress });
  const manifestPath = resolve(dirname(tasksPath), "manifest.json");
  const manifest = buildManifest(report.tasks, {
    name: "shop",
    dbId: "shop",
    dbPath,
    dbPathInManifest: relative(dirname(tasksPath), dbPath).split("\\").join("/"),
    tasksFile: basename(tasksPath),
    madeBy: {
      command: `t2s tasks author shop --seed ${seed}`,
      method: "programmatic templates over the live data (lib/tasks/shop), verified twice, near-duplicates dropped, balanced per archetype x difficulty",
      seed,
      templates: report.templates,
      candidates: report.candidates,
      not_kept: report.dropped,
      kit_version: kitVersion(),
    },
  });
  writeTasks(tasksPath, report.tasks);
  writeManifest(manifestPath, manifest);
  return { report, manifest, tasksPath, manifestPath };
}
