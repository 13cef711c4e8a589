/** A tiny SQLite database and task file for rollout tests, built in a scratch folder. */
import Database from "better-sqlite3";
import { writeFileSync } from "node:fs";
import { join } from "node:path";

/** Writes items.sqlite (5 items with prices) into `dir` and returns its path. */
export function makeItemsDb(dir: string): string {
  const path = join(dir, "items.sqlite");
  const db = new Database(path);
  db.exec(`CREATE TABLE items (
    id INTEGER PRIMARY KEY,
    name TEXT NOT NULL, -- what the item is called
    price REAL NOT NULL -- price in USD
  );`);
  const ins = db.prepare("INSERT INTO items (id, name, price) VALUES (?, ?, ?)");
  [[1, "pen", 2.5], [2, "book", 12], [3, "lamp", 30], [4, "mug", 4], [5, "desk", 120]].forEach((r) => ins.run(...r));
  db.close();
  return path;
}

export interface MiniTask {
  id: string;
  question: string;
  gold_sql: string;
  difficulty?: string;
}

/** The questions the fake servers are scripted on, with their gold queries. */
export const ITEM_TASKS: MiniTask[] = [
  { id: "count", question: "How many items are there?", gold_sql: "SELECT count(*) FROM items", difficulty: "easy" },
  { id: "priciest", question: "Which item is the most expensive?", gold_sql: "SELECT name FROM items ORDER BY price DESC LIMIT 1", difficulty: "easy" },
  { id: "cheap", question: "Which items cost less than 5 dollars?", gold_sql: "SELECT name FROM items WHERE price < 5", difficulty: "medium" },
  { id: "names", question: "List the names of all items.", gold_sql: "SELECT name FROM items", difficulty: "medium" },
  { id: "total", question: "What do all items cost together?", gold_sql: "SELECT sum(price) FROM items", difficulty: "hard" },
  { id: "busy", question: "What is the cheapest item?", gold_sql: "SELECT name FROM items ORDER BY price LIMIT 1", difficulty: "hard" },
];

/** Writes tasks.jsonl beside items.sqlite (db_path relative) and returns its path. */
export function writeItemTasks(dir: string, tasks: MiniTask[] = ITEM_TASKS): string {
  const path = join(dir, "tasks.jsonl");
  const lines = tasks.map((t) => JSON.stringify({
    id: t.id, db_id: "items", db_path: "items.sqlite", question: t.question, gold_sql: t.gold_sql,
    difficulty: t.difficulty ?? "easy", archetype: "lookup", style: "plain", split: "holdout", source: "test",
  }));
  writeFileSync(path, lines.join("\n") + "\n");
  return path;
}

/** A reply holding `sql` in a fenced block. */
export const fenced = (sql: string) => `Here you go:\n\`\`\`sql\n${sql}\n\`\`\``;
