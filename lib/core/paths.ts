/**
 * Where the kit's own files live. Lib code that notebooks import cannot use `import.meta` (tslab compiles
 * it to CommonJS), so the package root is found from T2S_ROOT, else by walking up from the running script
 * and from the working directory to the package.json named "t2s-lab".
 */
import { existsSync, readFileSync } from "node:fs";
import { dirname, join, resolve } from "node:path";

function findRootFrom(start: string): string | undefined {
  let dir = resolve(start);
  for (;;) {
    const pkg = join(dir, "package.json");
    if (existsSync(pkg)) {
      try {
        if (JSON.parse(readFileSync(pkg, "utf8")).name === "t2s-lab") return dir;
      } catch {
        // an unreadable package.json is not ours; keep walking up
      }
    }
    const parent = dirname(dir);
    if (parent === dir) return undefined;
    dir = parent;
  }
}

let cachedRoot: string | undefined;

/** The absolute path of the t2s-lab package root. */
export function kitRoot(): string {
  if (cachedRoot) return cachedRoot;
  const candidates = [process.env.T2S_ROOT, process.argv[1] && dirname(process.argv[1]), process.cwd()];
  for (const c of candidates) {
    const root = c ? findRootFrom(c) : undefined;
    if (root) return (cachedRoot = root);
  }
  throw new Error("cannot find the t2s-lab package root; set T2S_ROOT to the folder holding its package.json");
}

/** A path inside the kit's package root. */
export function kitPath(...parts: string[]): string {
  return join(kitRoot(), ...parts);
}

/** The kit's version from its package.json. */
export function kitVersion(): string {
  return JSON.parse(readFileSync(kitPath("package.json"), "utf8")).version as string;
}
