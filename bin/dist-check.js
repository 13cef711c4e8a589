// Whether dist/ (the compiled lib/, from `npm run build`) matches lib/: the signature is every lib/ source
// file's path, size and modification time, so any edit, addition or removal makes dist/ stale. Costs a
// directory walk and one stat per file (a few milliseconds), paid at every start of `t2s`.
import { readdirSync, readFileSync, statSync } from "node:fs";
import { join, relative } from "node:path";

function walk(dir, out) {
  for (const e of readdirSync(dir, { withFileTypes: true })) {
    const p = join(dir, e.name);
    if (e.isDirectory()) walk(p, out);
    else if (e.name.endsWith(".ts") || e.name.endsWith(".cjs")) out.push(p);
  }
  return out;
}

/** The signature of the sources under `libDir`: one "path size mtime" line per file, sorted. */
export function sourceSignature(libDir) {
  const lines = walk(libDir, []).map((p) => {
    const st = statSync(p);
    return `${relative(libDir, p)} ${st.size} ${st.mtimeMs}\n`;
  });
  return lines.sort().join("");
}

/** True when `distDir` holds a build of exactly the sources under `libDir`. */
export function distIsFresh(libDir, distDir) {
  let built;
  try {
    built = readFileSync(join(distDir, ".sources"), "utf8");
  } catch {
    return false;
  }
  return built === sourceSignature(libDir);
}
