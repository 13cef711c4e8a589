/**
 * Finding notebooks: a name like `00-smoke` (with or without `.ipynb`) means notebooks/<name>.ipynb in the
 * kit; anything that exists as a path is taken as that path.
 */
import { existsSync, readdirSync, statSync } from "node:fs";
import { resolve } from "node:path";
import { T2sError } from "../core/errors.js";
import { kitPath } from "../core/paths.js";

/** The kit's notebooks folder. */
export function notebooksDir(): string {
  return kitPath("notebooks");
}

/** Absolute paths of the kit's notebooks, sorted by name. */
export function listNotebooks(dir = notebooksDir()): string[] {
  if (!existsSync(dir)) return [];
  return readdirSync(dir)
    .filter((f) => f.endsWith(".ipynb") && !f.startsWith("."))
    .sort()
    .map((f) => resolve(dir, f));
}

/** The notebook file a name or path refers to; throws T2sError listing the known names when none matches. */
export function resolveNotebook(nameOrPath: string, cwd = process.cwd()): string {
  const asPath = resolve(cwd, nameOrPath);
  if (existsSync(asPath) && statSync(asPath).isFile()) return asPath;
  const base = nameOrPath.replace(/\.ipynb$/i, "");
  const inKit = resolve(notebooksDir(), `${base}.ipynb`);
  if (existsSync(inKit)) return inKit;
  const known = listNotebooks().map((p) => p.replace(/^.*\//, "").replace(/\.ipynb$/, ""));
  throw new T2sError(
    "notebook_not_found",
    `no notebook '${nameOrPath}' (looked for ${asPath} and ${inKit}); known: ${known.join(", ") || "(none)"}`,
  );
}
