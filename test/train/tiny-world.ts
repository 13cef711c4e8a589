/** A training world small enough for CPU tests: the tiny Qwen2 fixture (context widened), a one-table database, two tasks. */
import { cpSync, readFileSync, writeFileSync } from "node:fs";
import { join, resolve } from "node:path";
import Database from "better-sqlite3";
import { scratchDir } from "../helpers.js";

/** Writes the world into a fresh folder (model/, tiny.sqlite, tasks.jsonl) and returns the folder. */
export function tinyTrainingWorld(prefix: string): string {
  const dir = scratchDir(prefix);
  cpSync(resolve("test/fixtures/model/qwen2"), join(dir, "model"), { recursive: true });
  const cfgPath = join(dir, "model", "config.json");
  const mc = JSON.parse(readFileSync(cfgPath, "utf8"));
  mc.max_position_embeddings = 4096;
  writeFileSync(cfgPath, JSON.stringify(mc));
  const db = new Database(join(dir, "tiny.sqlite"));
  db.exec("CREATE TABLE pet (id INTEGER PRIMARY KEY, name TEXT); INSERT INTO pet VALUES (1, 'ada'), (2, 'bo'), (3, 'cy');");
  db.close();
  const task = (id: string, q: string, sql: string) => ({ id, db_id: "tiny", db_path: "tiny.sqlite", question: q, gold_sql: sql, difficulty: "easy", archetype: "count", style: "terse", split: "train", source: "test" });
  writeFileSync(join(dir, "tasks.jsonl"), [task("t1", "How many pets?", "SELECT COUNT(*) FROM pet"), task("t2", "Name of pet 2?", "SELECT name FROM pet WHERE id = 2")].map((t) => JSON.stringify(t)).join("\n") + "\n");
  return dir;
}
