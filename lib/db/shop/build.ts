/**
 * Builds the shop database file: schema.sql exactly, rows from the seeded generator, written to a fresh
 * file with a fixed page size and no timestamps, then VACUUMed, so the same seed (and SQLite version)
 * always gives the same bytes. The file is written beside the target and renamed into place, so a failed
 * build never leaves a half-written database where a good one was.
 */
import Database from "better-sqlite3";
import { existsSync, mkdirSync, readFileSync, renameSync, rmSync } from "node:fs";
import { dirname, resolve } from "node:path";
import { T2sError } from "../../core/errors.js";
import { kitPath } from "../../core/paths.js";
import { fileSha256 } from "../copies.js";
import { generateShop, type ShopRows } from "./generate.js";

/** The seed of the committed data/shop/shop.sqlite. */
export const DEFAULT_SHOP_SEED = 42;

/** Where the shipped shop database lives. */
export function defaultShopPath(): string {
  return kitPath("data", "shop", "shop.sqlite");
}

/** The schema DDL of the shop database (with its column comments). */
export function shopSchemaSql(): string {
  return readFileSync(kitPath("lib", "db", "shop", "schema.sql"), "utf8");
}

/** The NOTES block for prompts: order total formula, revenue rule, NULL meanings. */
export function shopNotes(): string {
  return readFileSync(kitPath("lib", "db", "shop", "notes.md"), "utf8");
}

const TABLE_ORDER: (keyof ShopRows)[] = ["categories", "products", "customers", "employees", "orders", "order_items", "payments", "reviews"];

/** Writes the shop database for `seed` to `outPath`; returns its path and sha256. */
export function buildShopDatabase(outPath: string, opts: { seed?: number } = {}): { path: string; sha256: string } {
  const seed = opts.seed ?? DEFAULT_SHOP_SEED;
  if (!Number.isInteger(seed) || seed < 0 || seed > 0xffffffff) throw new T2sError("bad_seed", `seed must be an integer in 0..4294967295, got ${seed}`);
  const path = resolve(outPath);
  mkdirSync(dirname(path), { recursive: true });
  const tmp = `${path}.building-${process.pid}`;
  for (const p of [tmp, `${tmp}-journal`]) rmSync(p, { force: true });
  const rows = generateShop(seed);
  const db = new Database(tmp);
  try {
    db.pragma("page_size = 4096");
    db.pragma("journal_mode = DELETE");
    db.pragma("foreign_keys = ON");
    db.exec(shopSchemaSql());
    db.transaction(() => {
      for (const table of TABLE_ORDER) {
        const data = rows[table];
        if (data.length === 0) continue;
        const insert = db.prepare(`INSERT INTO ${table} VALUES (${data[0].map(() => "?").join(", ")})`);
        for (const r of data) insert.run(...r);
      }
    })();
    const problems = db.pragma("foreign_key_check") as unknown[];
    if (problems.length > 0) throw new T2sError("shop_build_failed", `generated rows break ${problems.length} foreign keys (seed ${seed})`);
    db.pragma("user_version = 1");
    db.exec("VACUUM");
  } catch (e) {
    db.close();
    rmSync(tmp, { force: true });
    throw e;
  }
  db.close();
  if (existsSync(`${tmp}-journal`)) rmSync(`${tmp}-journal`, { force: true });
  renameSync(tmp, path);
  return { path, sha256: fileSha256(path) };
}
