/** A small database for the db tests, made by code: typed values, a blob, NULLs, enough rows to join. */
import Database from "better-sqlite3";
import { join } from "node:path";
import { scratchDir } from "../helpers.js";

/** Creates the fixture database in a fresh scratch folder and returns its path. */
export function makeFixtureDb(dir: string = scratchDir("t2s-db-")): string {
  const path = join(dir, "fixture.sqlite");
  const db = new Database(path);
  db.exec(`
    CREATE TABLE items (
      id INTEGER PRIMARY KEY,
      name TEXT NOT NULL,      -- what the item is called
      price REAL,              -- USD; NULL when not priced yet
      data BLOB
    );
    CREATE TABLE tags (item_id INTEGER REFERENCES items(id), tag TEXT);
  `);
  const ins = db.prepare("INSERT INTO items VALUES (?, ?, ?, ?)");
  const tag = db.prepare("INSERT INTO tags VALUES (?, ?)");
  db.transaction(() => {
    ins.run(1, "apple", 1.5, Buffer.from([0, 255, 16]));
    ins.run(2, "pear", null, null);
    ins.run(3, "plum", 2, null);
    for (let i = 0; i < 300; i++) tag.run((i % 3) + 1, `t${i}`);
  })();
  db.close();
  return path;
}
