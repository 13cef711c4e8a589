/**
 * The layering of lib/ as docs/architecture.md states it: every import in lib/ (static, type-only,
 * re-exports, dynamic import() and require()) stays in its own folder or goes to a folder lower in the
 * stated order, so data flows one way and folders cannot form a cycle; modules inside a folder form no
 * cycle either; lib/model reaches TensorFlow.js only through lib/backend. Every folder of lib/ is in the
 * order and has its paragraph in the document.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { existsSync, readdirSync, readFileSync, statSync } from "node:fs";
import { dirname, join, relative, resolve, sep } from "node:path";
import ts from "typescript";
import { repoRoot as ROOT } from "./helpers.js";

const LIB = join(ROOT, "lib");
const DOC = readFileSync(join(ROOT, "docs/architecture.md"), "utf8");

/** The folders of lib/, lowest first, from the document's "Layer order" line. */
function statedOrder(doc: string): string[] {
  const line = /^Layer order, lowest first: (.+)$/m.exec(doc);
  assert.ok(line, 'docs/architecture.md needs a line "Layer order, lowest first: a < b < ..."');
  return line[1].split("<").map((s) => s.trim().replace(/^`|`$/g, "").replace(/^lib\//, ""));
}

function sourceFiles(dir: string): string[] {
  return readdirSync(dir).sort().flatMap((name) => {
    const p = join(dir, name);
    if (statSync(p).isDirectory()) return sourceFiles(p);
    return /\.(ts|mts|cts|js|mjs|cjs)$/.test(name) ? [p] : [];
  });
}

/** The lib/ file a relative specifier names (".js" written for a ".ts" source), or null. */
function resolveImport(from: string, spec: string): string | null {
  const target = resolve(dirname(from), spec);
  const candidates = [target, target.replace(/\.js$/, ".ts"), target.replace(/\.mjs$/, ".mts"), target.replace(/\.cjs$/, ".cts"), `${target}.ts`, join(target, "index.ts")];
  return candidates.find((c) => existsSync(c) && statSync(c).isFile()) ?? null;
}

/** The lib/ folder a file belongs to ("" for a file directly in lib/). */
function folderOf(file: string): string {
  const parts = relative(LIB, file).split(sep);
  return parts.length > 1 ? parts[0] : "";
}

interface Edge {
  from: string;
  to: string;
}

function libImports(): { files: string[]; edges: Edge[]; unresolved: string[] } {
  const files = sourceFiles(LIB);
  const edges: Edge[] = [];
  const unresolved: string[] = [];
  for (const file of files) {
    // preProcessFile lists imports, `import type`, re-exports, import() and require() with string literals
    const info = ts.preProcessFile(readFileSync(file, "utf8"), true, true);
    for (const ref of info.importedFiles) {
      if (!ref.fileName.startsWith(".")) continue;
      const to = resolveImport(file, ref.fileName);
      if (to === null) unresolved.push(`${relative(ROOT, file)}: ${ref.fileName}`);
      else if (to.startsWith(LIB + sep)) edges.push({ from: file, to });
      else unresolved.push(`${relative(ROOT, file)}: ${ref.fileName} (outside lib/)`);
    }
  }
  return { files, edges, unresolved };
}

test("every folder of lib/ is in the stated layer order, once, and has its paragraph in docs/architecture.md", () => {
  const order = statedOrder(DOC);
  assert.equal(new Set(order).size, order.length, `a folder appears twice in the layer order: ${order.join(" < ")}`);
  const folders = readdirSync(LIB).filter((n) => statSync(join(LIB, n)).isDirectory()).sort();
  assert.deepEqual([...order].sort(), folders, "the layer order names exactly the folders of lib/");
  const loose = readdirSync(LIB).filter((n) => !statSync(join(LIB, n)).isDirectory());
  assert.deepEqual(loose, [], "every module of lib/ lives in a folder");
  for (const f of folders) assert.match(DOC, new RegExp(`^### lib/${f}\\b`, "m"), `docs/architecture.md has no "### lib/${f}" paragraph`);
});

/** The imports from one folder into a folder above it in `order`, as "from -> to". */
function upwardImports(edges: Edge[], order: string[]): string[] {
  const rank = new Map(order.map((f, i) => [f, i]));
  return edges
    .filter((e) => folderOf(e.from) !== folderOf(e.to))
    .filter((e) => (rank.get(folderOf(e.to)) ?? Infinity) > (rank.get(folderOf(e.from)) ?? -Infinity))
    .map((e) => `${relative(ROOT, e.from)} -> ${relative(ROOT, e.to)}`);
}

/** Each import cycle found by a depth-first walk, as "a -> b -> a". */
function importCycles(files: string[], edges: Edge[]): string[] {
  const next = new Map<string, string[]>(files.map((f) => [f, []]));
  for (const e of edges) next.get(e.from)?.push(e.to);
  const state = new Map<string, "open" | "done">();
  const cycles: string[] = [];
  const visit = (file: string, path: string[]): void => {
    state.set(file, "open");
    for (const to of next.get(file) ?? []) {
      if (state.get(to) === "open") cycles.push([...path.slice(path.indexOf(to)), to].map((p) => relative(ROOT, p)).join(" -> "));
      else if (!state.has(to)) visit(to, [...path, to]);
    }
    state.set(file, "done");
  };
  for (const f of files) if (!state.has(f)) visit(f, [f]);
  return cycles;
}

test("no module of lib/ imports a folder above its own in the layer order", () => {
  const order = statedOrder(DOC);
  const { edges, unresolved } = libImports();
  assert.deepEqual(unresolved, [], "every relative import in lib/ names a file in lib/");
  assert.deepEqual(upwardImports(edges, order), [], `imports that run up the layers (${order.join(" < ")})`);
});

test("the modules of lib/ import each other without a cycle", () => {
  const { files, edges } = libImports();
  assert.deepEqual(importCycles(files, edges), []);
});

test("lib/model reaches TensorFlow.js only through lib/backend (one engine instance)", () => {
  const direct = sourceFiles(join(LIB, "model")).filter((file) =>
    ts.preProcessFile(readFileSync(file, "utf8"), true, true).importedFiles.some((r) => r.fileName.startsWith("@tensorflow/")),
  );
  assert.deepEqual(direct.map((f) => relative(ROOT, f)), []);
});

test("the checks see every kind of import, an upward import and a cycle", () => {
  const probe = "import type { A } from '../cli/main.js';\nconst m = await import(\"./x.js\");\nconst r = require('../db/pool.js');\nexport { b } from './y.js';";
  const specs = ts.preProcessFile(probe, true, true).importedFiles.map((r) => r.fileName);
  assert.deepEqual(specs.sort(), ["../cli/main.js", "../db/pool.js", "./x.js", "./y.js"]);
  assert.deepEqual(statedOrder("Layer order, lowest first: `lib/core` < db < cli\n"), ["core", "db", "cli"]);
  const [a, b, c] = ["db/a.ts", "db/b.ts", "cli/c.ts"].map((f) => join(LIB, f));
  const edges = [{ from: a, to: c }, { from: c, to: a }, { from: a, to: b }, { from: b, to: a }];
  assert.deepEqual(upwardImports(edges, ["core", "db", "cli"]), ["lib/db/a.ts -> lib/cli/c.ts"]);
  assert.deepEqual(importCycles([a, b, c], edges), ["lib/db/a.ts -> lib/cli/c.ts -> lib/db/a.ts", "lib/db/a.ts -> lib/db/b.ts -> lib/db/a.ts"]);
});
