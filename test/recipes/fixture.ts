/** A tiny one-table database and task file for the recipe tests (short prompts keep CPU steps fast). */
import Database from "better-sqlite3";
import { join } from "node:path";
import { writeTasks } from "../../lib/tasks/io.js";
import type { Task } from "../../lib/tasks/types.js";

/** Writes mini.sqlite and tasks.jsonl (train and holdout tasks) into `dir`; returns the task file path. */
export function miniTasks(dir: string): string {
  const dbPath = join(dir, "mini.sqlite");
  const db = new Database(dbPath);
  db.exec("CREATE TABLE pets (pet_id INTEGER PRIMARY KEY, name TEXT NOT NULL, kind TEXT NOT NULL, age INTEGER NOT NULL -- years\n)");
  const ins = db.prepare("INSERT INTO pets (name, kind, age) VALUES (?, ?, ?)");
  [["Rex", "dog", 3], ["Tom", "cat", 5], ["Kiwi", "bird", 1], ["Max", "dog", 7]].forEach((r) => ins.run(...r));
  db.close();
  const kinds = ["dog", "cat", "bird"];
  const tasks: Task[] = [];
  let n = 0;
  for (const kind of kinds) {
    for (const [q, sql] of [
      [`How many pets are a ${kind}?`, `SELECT COUNT(*) FROM pets WHERE kind = '${kind}'`],
      [`List the names of every ${kind}.`, `SELECT name FROM pets WHERE kind = '${kind}'`],
    ]) {
      tasks.push({ id: `t${n}`, db_id: "mini", db_path: dbPath, question: q, gold_sql: sql, difficulty: "easy", archetype: "lookup", style: "terse", source: "test", split: n % 3 === 2 ? "holdout" : "train" });
      n++;
    }
  }
  const file = join(dir, "tasks.jsonl");
  writeTasks(file, tasks);
  return file;
}
