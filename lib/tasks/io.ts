/**
 * Reading and writing task sets in the kit's jsonl format (one Task per line). Reading checks every
 * record and names file:line for the first bad one; db_path comes back absolute, resolved against the
 * file's folder, and is written back relative to the folder of the file being written.
 */
import { existsSync, mkdirSync, readFileSync, statSync } from "node:fs";
import { writeFileAtomic } from "../core/files.js";
import { toJsonl } from "../core/jsonl.js";
import { dirname, isAbsolute, relative, resolve, sep } from "node:path";
import { T2sError } from "../core/errors.js";
import { splitFor, taskId } from "./split.js";
import type { Task } from "./types.js";

const REQUIRED = ["db_id", "db_path", "question", "gold_sql"] as const;
const OPTIONAL_STRINGS = ["id", "evidence", "difficulty", "archetype", "style", "source"] as const;

/**
 * Checks one parsed record and returns it as a Task. Missing id and split are computed (taskId, splitFor);
 * missing difficulty/archetype/style read as "unknown", missing source as "kit". `where` names the
 * record in errors ("file:line").
 */
export function toTask(record: unknown, where: string): Task {
  if (record === null || typeof record !== "object" || Array.isArray(record)) {
    throw new T2sError("bad_task", `${where}: a task must be a JSON object`);
  }
  const r = record as Record<string, unknown>;
  for (const k of REQUIRED) {
    if (typeof r[k] !== "string" || (r[k] as string).trim() === "") {
      throw new T2sError("bad_task", `${where}: field '${k}' must be a non-empty string`);
    }
  }
  for (const k of OPTIONAL_STRINGS) {
    if (r[k] !== undefined && r[k] !== null && typeof r[k] !== "string") {
      throw new T2sError("bad_task", `${where}: field '${k}' must be a string`);
    }
  }
  if (r.split !== undefined && r.split !== "train" && r.split !== "holdout") {
    throw new T2sError("bad_task", `${where}: field 'split' must be "train" or "holdout", got ${JSON.stringify(r.split)}`);
  }
  if (r.grading !== undefined && (r.grading === null || typeof r.grading !== "object" || Array.isArray(r.grading))) {
    throw new T2sError("bad_task", `${where}: field 'grading' must be an object`);
  }
  if (r.dialect !== undefined && r.dialect !== "sqlite" && r.dialect !== "spider") {
    throw new T2sError("bad_task", `${where}: field 'dialect' must be "sqlite" or "spider", got ${JSON.stringify(r.dialect)}`);
  }
  const id = (r.id as string | undefined) || taskId(r.question as string, r.db_id as string);
  const task: Task = {
    ...(r as object),
    id,
    db_id: r.db_id as string,
    db_path: r.db_path as string,
    question: r.question as string,
    gold_sql: r.gold_sql as string,
    difficulty: (r.difficulty as string | undefined) || "unknown",
    archetype: (r.archetype as string | undefined) || "unknown",
    style: (r.style as string | undefined) || "unknown",
    split: (r.split as Task["split"] | undefined) ?? splitFor(id),
    source: (r.source as string | undefined) || "kit",
  } as Task;
  if (r.evidence === null || r.evidence === undefined) delete task.evidence;
  return task;
}

/** The tasks of a kit jsonl file, db_path made absolute. Throws T2sError naming file:line on a bad line. */
export function readTasks(path: string): Task[] {
  const abs = resolve(path);
  const base = dirname(abs);
  const tasks: Task[] = [];
  const seen = new Map<string, number>();
  const lines = readJsonlWithLines(abs);
  for (const { line, value } of lines) {
    const where = `${abs}:${line}`;
    const t = toTask(value, where);
    const prev = seen.get(t.id);
    if (prev !== undefined) throw new T2sError("bad_task", `${where}: duplicate task id ${t.id} (first on line ${prev})`);
    seen.set(t.id, line);
    t.db_path = isAbsolute(t.db_path) ? t.db_path : resolve(base, t.db_path);
    tasks.push(t);
  }
  return tasks;
}

function readJsonlWithLines(path: string): { line: number; value: unknown }[] {
  if (!existsSync(path)) throw new T2sError("not_found", `no such task file: ${path}`);
  if (statSync(path).isDirectory()) throw new T2sError("not_a_file", `${path} is a folder, not a task file (Spider and BIRD folders are read by 'tasks verify', 'benchmark' and loadTasks)`);
  const out: { line: number; value: unknown }[] = [];
  readFileSync(path, "utf8").split("\n").forEach((raw, n) => {
    if (raw.trim() === "") return;
    try {
      out.push({ line: n + 1, value: JSON.parse(raw) });
    } catch (e) {
      throw new T2sError("bad_jsonl", `${path}:${n + 1}: malformed JSON (${(e as Error).message}): ${raw.slice(0, 120)}`);
    }
  });
  return out;
}

/** Writes tasks as jsonl (atomically: a temp file renamed over the target); db_path relative to the file. */
export function writeTasks(path: string, tasks: Task[]): void {
  const abs = resolve(path);
  const base = dirname(abs);
  mkdirSync(base, { recursive: true });
  writeFileAtomic(abs, toJsonl(tasks.map((t) => portable(t, base))));
}

/** The task with db_path relative to `base` when it is absolute and below or near it (always / separators). */
export function portable(task: Task, base: string): Task {
  if (!isAbsolute(task.db_path)) return task;
  const rel = relative(base, task.db_path).split(sep).join("/");
  return { ...task, db_path: rel === "" ? task.db_path : rel };
}
