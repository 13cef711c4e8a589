/**
 * Loaders for public text-to-SQL formats, each returning kit Tasks with absolute db paths:
 *  - Spider: <dir>/tables.json, <dir>/{dev.json|train_spider.json} (db_id, question, query),
 *    databases at <dir>/database/<db_id>/<db_id>.sqlite.
 *  - BIRD: <dir>/{dev.json|train.json|mini_dev_sqlite.json} (db_id, question, evidence, SQL, optional
 *    question_id, difficulty), databases at <dir>/<name>_databases/<db_id>/<db_id>.sqlite with
 *    database_description/*.csv beside them.
 *  - BIRD-Platinum: a jsonl (or JSON array) of question_id, db_id, question, evidence, SQL,
 *    grading_method (multiset | list | subset,=,N | subset,>=,N); databases under a root folder as
 *    <root>/<db_id>/<db_id>.sqlite.
 *  - kit: the kit's own jsonl (readTasks).
 * Every bad record throws T2sError naming file:line. Tasks of Spider, BIRD and BIRD-Platinum sources run in
 * the "spider" dialect (lib/db/dialect.ts: their golds use double-quoted strings); Spider tasks get Spider's
 * hardness level (hardness.ts) as their difficulty, BIRD's keep BIRD's labels and compare rows as BIRD does,
 * in any order. A task whose database file is missing, or does not open as SQLite (corrupt, not a
 * database), is skipped and listed in `missing` (loadTaskSource), or is an error with `strict`.
 */
import { existsSync, readdirSync, readFileSync, statSync } from "node:fs";
import { basename, dirname, join, resolve } from "node:path";
import { T2sError } from "../core/errors.js";
import { ConnectionError, openReadOnly } from "../db/connection.js";
import { spiderHardness } from "./hardness.js";
import { readTasks } from "./io.js";
import { readJsonArray, parseLenient, type LocatedRecord } from "./jsonfile.js";
import { splitFor, taskId } from "./split.js";
import type { GradingOverrides, Task } from "./types.js";

export type SourceFormat = "kit" | "spider" | "bird" | "platinum";
export const SOURCE_FORMATS: SourceFormat[] = ["kit", "spider", "bird", "platinum"];

export interface LoadOptions {
  /** Which format; detected from the path when left out. */
  format?: SourceFormat;
  /** The records file inside a Spider/BIRD folder (default dev.json). */
  file?: string;
  /** BIRD-Platinum: the folder holding <db_id>/<db_id>.sqlite (default: the file's folder, then its databases/). */
  dbRoot?: string;
  /** A task whose database file is missing is an error (T2sError "no_database") instead of being skipped.
   * loadTasks defaults to true, loadTaskSource to false. */
  strict?: boolean;
}

/** Tasks left out because their database file does not exist or cannot be read as SQLite, per database. */
export interface MissingDatabase {
  db_id: string;
  path: string;
  tasks: number;
  /** Why: "no file at <path>", or "not a readable SQLite database (...)". */
  reason: string;
}

/** Why the database at `path` cannot serve tasks, or null when it opens and its schema reads. */
function databaseProblem(path: string): string | null {
  if (!existsSync(path)) return `no file at ${path}`;
  try {
    openReadOnly(path).close();
    return null;
  } catch (e) {
    const message = e instanceof ConnectionError ? e.error.message : (e as Error).message;
    return `not a readable SQLite database: ${message}`;
  }
}

export interface LoadedTasks {
  tasks: Task[];
  missing: MissingDatabase[];
  format: SourceFormat;
}

/** Which format a path holds: a folder with tables.json is Spider, one with *_databases is BIRD. */
export function detectFormat(path: string): SourceFormat {
  if (!existsSync(path)) throw new T2sError("not_found", `no such file or folder: ${path}`);
  if (statSync(path).isDirectory()) {
    if (existsSync(join(path, "tables.json")) && existsSync(join(path, "database"))) return "spider";
    if (readdirSync(path).some((n) => n.endsWith("_databases"))) return "bird";
    throw new T2sError("unknown_format", `${path}: not a Spider folder (tables.json + database/) nor a BIRD folder (*_databases/); pass --format`);
  }
  const first = readFileSync(path, "utf8").split("\n").find((l) => l.trim() !== "") ?? "";
  if (/"SQL"\s*:/.test(first) || /"grading_method"/.test(first) || /"question_id"/.test(first)) return "platinum";
  return "kit";
}

/** Tasks from any supported source; see the module comment for the layouts. A missing database is an
 * error unless `strict` is false (then its tasks are left out silently: use loadTaskSource to list them). */
export function loadTasks(path: string, opts: LoadOptions = {}): Task[] {
  return loadTaskSource(path, { ...opts, strict: opts.strict ?? true }).tasks;
}

/** Tasks from any supported source, with the databases that were not found (skipped unless `strict`). */
export function loadTaskSource(path: string, opts: LoadOptions = {}): LoadedTasks {
  const format = opts.format ?? detectFormat(path);
  let all: Task[];
  switch (format) {
    case "kit":
      all = readTasks(path);
      break;
    case "spider":
      all = loadSpider(path, opts);
      break;
    case "bird":
      all = loadBird(path, opts);
      break;
    case "platinum":
      all = loadPlatinum(path, opts);
      break;
    default:
      throw new T2sError("unknown_format", `unknown task format '${format as string}' (use ${SOURCE_FORMATS.join(", ")})`);
  }
  const missing = new Map<string, MissingDatabase>();
  // each database is opened once here, so one corrupt file is skipped like a missing one instead of
  // failing the run at its first task
  const problems = new Map<string, string | null>();
  const tasks = all.filter((t) => {
    let problem = problems.get(t.db_path);
    if (problem === undefined) problems.set(t.db_path, (problem = databaseProblem(t.db_path)));
    if (problem === null) return true;
    if (opts.strict) throw new T2sError("no_database", `${t.source}: database '${t.db_id}': ${problem}`);
    const m = missing.get(t.db_path) ?? { db_id: t.db_id, path: t.db_path, tasks: 0, reason: problem };
    m.tasks++;
    missing.set(t.db_path, m);
    return false;
  });
  return { tasks, missing: [...missing.values()], format };
}

/** One line per missing or unreadable database ("wta_1: 62 tasks (no file at ...)"), for a skipped-databases notice. */
export function describeMissing(missing: MissingDatabase[]): string {
  const n = missing.reduce((s, m) => s + m.tasks, 0);
  const what = missing.every((m) => m.reason.startsWith("no file")) ? "missing" : "missing or unreadable";
  const head = `skipped ${n} task${n === 1 ? "" : "s"} of ${missing.length} ${what} database${missing.length === 1 ? "" : "s"} (pass --strict to make this an error):`;
  return [head, ...missing.map((m) => `  ${m.db_id}: ${m.tasks} task${m.tasks === 1 ? "" : "s"} (${m.reason})`)].join("\n");
}

function str(rec: Record<string, unknown>, key: string, where: string): string {
  const v = rec[key];
  if (typeof v !== "string" || v.trim() === "") throw new T2sError("bad_task", `${where}: field '${key}' must be a non-empty string`);
  return v;
}

function asObject(value: unknown, where: string): Record<string, unknown> {
  if (value === null || typeof value !== "object" || Array.isArray(value)) throw new T2sError("bad_task", `${where}: a record must be a JSON object`);
  return value as Record<string, unknown>;
}

/** Gives each task its hash id; a repeated (question, db) gets "-2", "-3", ... in file order. */
function finishIds(tasks: Task[]): Task[] {
  const used = new Map<string, number>();
  for (const t of tasks) {
    const base = taskId(t.question, t.db_id);
    const n = (used.get(base) ?? 0) + 1;
    used.set(base, n);
    t.id = n === 1 ? base : `${base}-${n}`;
    t.split = splitFor(t.id);
  }
  return tasks;
}

/** Where a record's database file belongs (whether it exists is checked by loadTaskSource). */
function dbFile(root: string, dbId: string): string {
  return resolve(root, dbId, `${dbId}.sqlite`);
}

/** Tasks of a Spider folder (default records file dev.json, else train_spider.json). */
export function loadSpider(dir: string, opts: { file?: string } = {}): Task[] {
  const tablesPath = join(dir, "tables.json");
  const known = new Set<string>();
  for (const { line, value } of readJsonArray(tablesPath)) known.add(str(asObject(value, `${tablesPath}:${line}`), "db_id", `${tablesPath}:${line}`));
  const file = join(dir, opts.file ?? (existsSync(join(dir, "dev.json")) ? "dev.json" : "train_spider.json"));
  const tasks = readJsonArray(file).map(({ line, value }: LocatedRecord) => {
    const where = `${file}:${line}`;
    const r = asObject(value, where);
    const dbId = str(r, "db_id", where);
    if (!known.has(dbId)) throw new T2sError("bad_task", `${where}: db_id '${dbId}' is not described in ${tablesPath}`);
    return {
      id: "",
      db_id: dbId,
      db_path: dbFile(join(dir, "database"), dbId),
      question: str(r, "question", where),
      gold_sql: str(r, "query", where),
      difficulty: typeof r.difficulty === "string" ? r.difficulty : (spiderHardness(r.query as string) ?? "unknown"),
      archetype: "unknown",
      style: "spider",
      split: "train",
      dialect: "spider",
      source: `spider:${basename(file)}:${line}`,
    } satisfies Task;
  });
  return finishIds(tasks);
}

/** The BIRD databases folder matching a records file (dev.json -> dev_databases), else the only one. */
function birdDatabases(dir: string, file: string): string {
  const stem = basename(file).replace(/\.json$/, "").replace(/^mini_dev.*$/, "dev");
  const named = join(dir, `${stem}_databases`);
  if (existsSync(named)) return named;
  const all = readdirSync(dir).filter((n) => n.endsWith("_databases"));
  if (all.length === 1) return join(dir, all[0]);
  throw new T2sError("no_database", `${dir}: cannot tell which *_databases folder holds the databases of ${basename(file)} (found: ${all.join(", ") || "none"})`);
}

/** A task from one BIRD-shaped record (db_id, question, SQL, evidence, difficulty); ids come later. */
function birdRecordTask(r: Record<string, unknown>, where: string, root: string, source: string): Task {
  const dbId = str(r, "db_id", where);
  const t: Task = {
    id: "",
    db_id: dbId,
    db_path: dbFile(root, dbId),
    question: str(r, "question", where),
    gold_sql: str(r, "SQL", where),
    difficulty: typeof r.difficulty === "string" ? r.difficulty : "unknown",
    archetype: "unknown",
    style: "bird",
    split: "train",
    dialect: "spider",
    source,
  };
  if (typeof r.evidence === "string" && r.evidence.trim() !== "") t.evidence = r.evidence;
  return t;
}

/** Tasks of a BIRD folder (default records file dev.json). Difficulty keeps BIRD's labels. */
export function loadBird(dir: string, opts: { file?: string } = {}): Task[] {
  const file = join(dir, opts.file ?? "dev.json");
  const root = birdDatabases(dir, file);
  const tasks = readJsonArray(file).map(({ line, value }) => {
    const where = `${file}:${line}`;
    const r = asObject(value, where);
    // BIRD's evaluator compares the rows as sets, in any order
    return { ...birdRecordTask(r, where, root, `bird:${basename(file)}:${r.question_id ?? line}`), grading: { order: "ignore" } } satisfies Task;
  });
  return finishIds(tasks);
}

/** The table descriptions of a BIRD database (file name -> CSV text), empty when it has none. */
export function birdDescriptions(dbPath: string): Record<string, string> {
  const folder = join(dirname(dbPath), "database_description");
  if (!existsSync(folder)) return {};
  const out: Record<string, string> = {};
  for (const n of readdirSync(folder).sort()) if (n.endsWith(".csv")) out[n] = readFileSync(join(folder, n), "latin1");
  return out;
}

/** The kit's grading overrides for a BIRD-Platinum grading_method. */
export function platinumGrading(method: unknown, where: string): GradingOverrides {
  if (method === undefined || method === null || method === "multiset") return { order: "ignore" };
  if (method === "list") return { order: "always" };
  if (typeof method === "string") {
    const m = /^subset\s*,\s*(>=|=)\s*,\s*(\d+)$/.exec(method.trim());
    if (m) return { order: "ignore", subset: true, subset_rows: { op: m[1] as "=" | ">=", n: Number(m[2]) } };
    if (method.trim() === "subset") return { order: "ignore", subset: true };
  }
  throw new T2sError("bad_task", `${where}: grading_method must be multiset, list or subset,=|>=,N; got ${JSON.stringify(method)}`);
}

function platinumRecords(path: string): LocatedRecord[] {
  if (!existsSync(path)) throw new T2sError("not_found", `no such file: ${path}`);
  const text = readFileSync(path, "utf8");
  if (text.trimStart().startsWith("[")) return readJsonArray(path);
  const out: LocatedRecord[] = [];
  text.split("\n").forEach((raw, i) => {
    if (raw.trim() === "") return;
    try {
      out.push({ line: i + 1, value: parseLenient(raw) });
    } catch (e) {
      throw new T2sError("bad_jsonl", `${path}:${i + 1}: malformed JSON (${(e as Error).message})`);
    }
  });
  return out;
}

/** Tasks of a BIRD-Platinum-style file; grading_method becomes the task's grading overrides. */
export function loadPlatinum(path: string, opts: { dbRoot?: string } = {}): Task[] {
  const file = resolve(path);
  const root = opts.dbRoot ?? (existsSync(join(dirname(file), "databases")) ? join(dirname(file), "databases") : dirname(file));
  const tasks = platinumRecords(file).map(({ line, value }) => {
    const where = `${file}:${line}`;
    const r = asObject(value, where);
    const t = birdRecordTask(r, where, root, `platinum:${basename(file)}:${r.question_id ?? line}`);
    t.grading = platinumGrading(r.grading_method, where);
    return t;
  });
  return finishIds(tasks);
}
