/** `t2s db ...`: build the shop database, print a database's schema as DDL, hash a database file. */
import type { Command } from "commander";
import { resolve } from "node:path";
import { existsSync } from "node:fs";
import { T2sError, UsageError } from "../core/errors.js";
import { fileSha256 } from "../db/copies.js";
import { schemaDdl } from "../db/schema.js";
import { buildShopDatabase, DEFAULT_SHOP_SEED, defaultShopPath } from "../db/shop/build.js";
import { intOption, outFile, printJson } from "./options.js";

export function registerDb(program: Command): void {
  const db = program.command("db").description("build, inspect and hash SQLite databases");

  db.command("build")
    .description("build a generated database (only 'shop' exists) deterministically from a seed")
    .argument("<name>", "which database to build: shop")
    .option("--seed <n>", `random seed (default ${DEFAULT_SHOP_SEED}, the committed data/shop/shop.sqlite)`, intOption("--seed", 0))
    .option("--out <path>", "where to write it (default data/shop/shop.sqlite in the kit)", outFile("--out", "shop.sqlite"))
    .option("--force", "overwrite the file at the target path (rows files and task manifests record its sha256)")
    .option("--json", "print {path, sha256, seed} as JSON")
    .action((name: string, opts: { seed?: number; out?: string; force?: boolean; json?: boolean }) => {
      if (name !== "shop") throw new UsageError(`unknown database '${name}': only 'shop' can be built`);
      const seed = opts.seed ?? DEFAULT_SHOP_SEED;
      if (seed > 0xffffffff) throw new UsageError(`--seed must be at most 4294967295, got ${seed}`);
      const target = opts.out ? resolve(opts.out) : defaultShopPath();
      if (existsSync(target) && !opts.force) {
        throw new T2sError("output_exists", `${target} already exists (sha256 ${fileSha256(target).slice(0, 12)}...); rows and tasks made on it would no longer match. Pass --out for a new file, or --force to overwrite it`);
      }
      const built = buildShopDatabase(target, { seed });
      if (opts.json) printJson({ ...built, seed });
      else process.stdout.write(`wrote ${built.path}\nseed   ${seed}\nsha256 ${built.sha256}\n`);
    });

  db.command("schema")
    .description("print a database's tables as CREATE TABLE text with column comments (as used in prompts)")
    .requiredOption("--db <path>", "SQLite database file")
    .option("--samples <n>", "add up to N example values per column", intOption("--samples", 0), 0)
    .option("--tables <names>", "comma-separated tables to include (default: all)")
    .option("--json", "print {db, ddl} as JSON")
    .action((opts: { db: string; samples: number; tables?: string; json?: boolean }) => {
      const tables = opts.tables ? opts.tables.split(",").map((t) => t.trim()).filter(Boolean) : undefined;
      const ddl = schemaDdl(opts.db, { sampleValues: opts.samples, tables });
      if (opts.json) printJson({ db: resolve(opts.db), ddl });
      else process.stdout.write(ddl);
    });

  db.command("hash")
    .description("print the sha256 of a database file (what private copies are checked against)")
    .requiredOption("--db <path>", "SQLite database file")
    .option("--json", "print {db, sha256} as JSON")
    .action((opts: { db: string; json?: boolean }) => {
      const sha256 = fileSha256(opts.db);
      if (opts.json) printJson({ db: resolve(opts.db), sha256 });
      else process.stdout.write(`${sha256}  ${opts.db}\n`);
    });
}
