/** Small fixture folders in the public layouts (Spider, BIRD, BIRD-Platinum), built in temp dirs. */
import Database from "better-sqlite3";
import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { scratchDir } from "../helpers.js";

/** A tiny SQLite database with a `pets` table (5 rows) at `path`. */
export function makePetsDb(path: string): string {
  const db = new Database(path);
  db.exec(`CREATE TABLE pets (id INTEGER PRIMARY KEY, name TEXT, kind TEXT, age INTEGER, owner TEXT);
    INSERT INTO pets VALUES (1,'Rex','dog',3,'ann'),(2,'Tom','cat',5,NULL),(3,'Kiki','bird',1,'bob'),
      (4,'Fido','dog',7,'ann'),(5,'Mia','cat',2,'cy');`);
  db.close();
  return path;
}

export function spiderFolder(records?: unknown[]): string {
  const dir = scratchDir("t2s-spider-");
  mkdirSync(join(dir, "database", "pets_1"), { recursive: true });
  makePetsDb(join(dir, "database", "pets_1", "pets_1.sqlite"));
  writeFileSync(join(dir, "tables.json"), JSON.stringify([{ db_id: "pets_1", table_names: ["pets"], column_names: [[-1, "*"], [0, "id"]] }], null, 2));
  const recs = records ?? [
    { db_id: "pets_1", question: "How many dogs are there?", query: "SELECT count(*) FROM pets WHERE kind = 'dog'" },
    { db_id: "pets_1", question: "List the names of cats.", query: "SELECT name FROM pets WHERE kind = 'cat'" },
  ];
  writeFileSync(join(dir, "dev.json"), JSON.stringify(recs, null, 2));
  return dir;
}

export function birdFolder(records?: unknown[]): string {
  const dir = scratchDir("t2s-bird-");
  const dbDir = join(dir, "dev_databases", "pets_1");
  mkdirSync(join(dbDir, "database_description"), { recursive: true });
  makePetsDb(join(dbDir, "pets_1.sqlite"));
  writeFileSync(join(dbDir, "database_description", "pets.csv"), "original_column_name,column_description\nage,age in years\n");
  const recs = records ?? [
    { question_id: 0, db_id: "pets_1", question: "How old is the oldest dog?", evidence: "oldest refers to MAX(age)", SQL: "SELECT MAX(age) FROM pets WHERE kind = 'dog'", difficulty: "simple" },
    { question_id: 1, db_id: "pets_1", question: "Which pets have no owner?", evidence: "", SQL: "SELECT name FROM pets WHERE owner IS NULL", difficulty: "moderate" },
  ];
  writeFileSync(join(dir, "dev.json"), JSON.stringify(recs, null, 2));
  return dir;
}

export function platinumFile(lines?: string[]): { dir: string; file: string } {
  const dir = scratchDir("t2s-plat-");
  mkdirSync(join(dir, "databases", "pets_1"), { recursive: true });
  makePetsDb(join(dir, "databases", "pets_1", "pets_1.sqlite"));
  const ls = lines ?? [
    JSON.stringify({ question_id: 7, db_id: "pets_1", question: "Names of dogs by age?", evidence: "", SQL: "SELECT name FROM pets WHERE kind='dog' ORDER BY age", grading_method: "list" }),
    '{"question_id": 8, "db_id": "pets_1", "question": "Any two pet names?", "evidence": NaN, "SQL": "SELECT name FROM pets", "grading_method": "subset,=,2"}',
    JSON.stringify({ question_id: 9, db_id: "pets_1", question: "Kinds of pets?", evidence: "kind is the species", SQL: "SELECT DISTINCT kind FROM pets", grading_method: "multiset" }),
  ];
  const file = join(dir, "plat.jsonl");
  writeFileSync(file, ls.join("\n") + "\n");
  return { dir, file };
}
