/**
 * The layering of lib/ as docs/architecture.md states it: every import in lib/ (static, type-only,
 * re-exports, dynamic import() and require()) stays in its own folder or goes to a folder lower in the
 * stated order, so data flows one way and folders cannot form a cycle; modules inside a folder form no
 * cycle either; each folder imports exactly the folders its paragraph's "Imports ..." sentence names;
 * lib/model and lib/train reach TensorFlow.js only through lib/backend; and inside lib/model no
 * implementation a module chooses imports that module (or what leads to it) back. Every folder of lib/ is
 * in the order and has its paragraph in the document.
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

for (const folder of ["model", "train"]) {
  test(`lib/${folder} reaches TensorFlow.js only through lib/backend (one engine instance)`, () => {
    const direct = sourceFiles(join(LIB, folder)).filter((file) =>
      ts.preProcessFile(readFileSync(file, "utf8"), true, true).importedFiles.some((r) => r.fileName.startsWith("@tensorflow/")),
    );
    assert.deepEqual(direct.map((f) => relative(ROOT, f)), []);
  });
}

/**
 * The folders each folder's paragraph says it imports: "Imports core, db, tasks." (a parenthesis after a
 * name says why), [] for "Imports nothing of lib/", null for "May import any folder".
 */
function declaredImports(doc: string): Map<string, string[] | null> {
  const out = new Map<string, string[] | null>();
  const sections = doc.split(/^(?=#{2,3} )/m);
  for (const section of sections) {
    const head = /^### lib\/(\w+)/.exec(section);
    if (!head) continue;
    const text = section.replace(/\s+/g, " ");
    if (/May import any folder/.test(text)) out.set(head[1], null);
    else if (/Imports nothing of lib\//.test(text)) out.set(head[1], []);
    else {
      const m = /Imports ([a-z, ]+(?:\([^)]*\)[a-z, ]*)*)\./.exec(text);
      assert.ok(m, `the paragraph of lib/${head[1]} has no "Imports ..." sentence`);
      out.set(head[1], m[1].replace(/\([^)]*\)/g, "").split(",").map((x) => x.trim()).filter(Boolean).sort());
    }
  }
  return out;
}

/** The other folders each folder's modules import. */
function folderImports(edges: Edge[]): Map<string, string[]> {
  const out = new Map<string, Set<string>>();
  for (const e of edges) {
    const [from, to] = [folderOf(e.from), folderOf(e.to)];
    if (from === to) continue;
    if (!out.has(from)) out.set(from, new Set());
    out.get(from)!.add(to);
  }
  return new Map([...out].map(([k, v]) => [k, [...v].sort()]));
}

/** "folder: imports X (not stated)" / "folder: states Y (not imported)" for each difference. */
function importLineDifferences(declared: Map<string, string[] | null>, actual: Map<string, string[]>): string[] {
  const out: string[] = [];
  for (const [folder, stated] of declared) {
    if (stated === null) continue;
    const real = actual.get(folder) ?? [];
    for (const f of real) if (!stated.includes(f)) out.push(`lib/${folder}: imports ${f} (not stated)`);
    for (const f of stated) if (!real.includes(f)) out.push(`lib/${folder}: states ${f} (not imported)`);
  }
  return out;
}

test("each folder imports exactly the folders its paragraph in docs/architecture.md names", () => {
  const declared = declaredImports(DOC);
  const folders = readdirSync(LIB).filter((n) => statSync(join(LIB, n)).isDirectory()).sort();
  assert.deepEqual([...declared.keys()].sort(), folders, "every folder's paragraph states what it imports");
  assert.deepEqual(importLineDifferences(declared, folderImports(libImports().edges)), []);
});

/**
 * Modules that choose among implementations of a contract: the implementations are the modules the
 * chooser imports that import the contract. None of them may reach the chooser, or a module that imports
 * it, through its own imports; and one outside the chooser's folder may import nothing of that folder
 * (the contract included), or the two folders point at each other.
 */
const CHOOSERS = [{ chooser: "model/engine/runners.ts", contract: "model/engine/runner.ts" }];

/** "implementation -> ... -> module" for each implementation that imports its way to a module that reaches the chooser (or is it). */
function backArrows(files: string[], edges: Edge[], chooser: string, contract: string): string[] {
  const next = new Map<string, string[]>(files.map((f) => [f, []]));
  const prev = new Map<string, string[]>(files.map((f) => [f, []]));
  for (const e of edges) {
    next.get(e.from)?.push(e.to);
    prev.get(e.to)?.push(e.from);
  }
  // the chooser and every module that reaches it
  const above = new Set<string>([chooser]);
  for (const queue = [chooser]; queue.length; ) for (const p of prev.get(queue.pop()!) ?? []) if (!above.has(p)) (above.add(p), queue.push(p));
  const implementations = (next.get(chooser) ?? []).filter((m) => m !== contract && (next.get(m) ?? []).includes(contract));
  const out: string[] = [];
  for (const impl of implementations) {
    if (dirname(impl) !== dirname(chooser)) {
      for (const to of next.get(impl) ?? []) if (dirname(to) === dirname(chooser)) out.push(`${relative(ROOT, impl)} -> ${relative(ROOT, to)} (back into the folder that chooses it)`);
    }
    const path = new Map<string, string[]>([[impl, [impl]]]);
    for (const queue = [impl]; queue.length; ) {
      const at = queue.shift()!;
      for (const to of next.get(at) ?? []) {
        if (path.has(to)) continue;
        path.set(to, [...path.get(at)!, to]);
        if (above.has(to)) out.push(path.get(to)!.map((p) => relative(ROOT, p)).join(" -> "));
        else queue.push(to);
      }
    }
  }
  return out;
}

test("inside lib/model no implementation imports back the module that chooses it", () => {
  const { files, edges } = libImports();
  for (const { chooser, contract } of CHOOSERS) {
    const [c, k] = [join(LIB, chooser), join(LIB, contract)];
    assert.ok(files.includes(c) && files.includes(k), `${chooser} and ${contract} exist`);
    const implementations = edges.filter((e) => e.from === c && e.to !== k && edges.some((x) => x.from === e.to && x.to === k));
    assert.ok(implementations.length >= 2, `${chooser} chooses among at least two implementations of ${contract}`);
    assert.deepEqual(backArrows(files, edges, c, k), []);
  }
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

test("the Imports check fails on an import its paragraph does not state, and the back-arrow check on a runner that imports the engine", () => {
  const doc = "### lib/core\nShared. Imports nothing of lib/.\n\n### lib/serve\nThe server (`x.ts`). Imports core,\nmodel (the chat layer).\n\n### lib/cli\nMay import any folder.\n";
  const declared = declaredImports(doc);
  assert.deepEqual([...declared], [["core", []], ["serve", ["core", "model"]], ["cli", null]]);
  const [serve, train, model, cli] = ["serve/a.ts", "train/b.ts", "model/c.ts", "cli/d.ts"].map((f) => join(LIB, f));
  const edges = [{ from: serve, to: train }, { from: serve, to: model }, { from: serve, to: join(LIB, "core/e.ts") }, { from: cli, to: train }];
  assert.deepEqual(importLineDifferences(declared, folderImports(edges)), ["lib/serve: imports train (not stated)"]);
  const [engine, runners, contract, cpu, gpu, helper] = ["model/engine/scheduler.ts", "model/engine/runners.ts", "model/engine/runner.ts", "model/engine/cpu.ts", "model/gpu/runner.ts", "model/gpu/helper.ts"].map((f) => join(LIB, f));
  const graph = [
    { from: engine, to: runners }, { from: engine, to: contract }, { from: runners, to: contract }, { from: runners, to: cpu }, { from: runners, to: gpu },
    { from: cpu, to: contract }, { from: gpu, to: contract }, { from: gpu, to: helper }, { from: helper, to: engine },
  ];
  const all = [engine, runners, contract, cpu, gpu, helper];
  assert.deepEqual(backArrows(all, graph, runners, contract), [
    "lib/model/gpu/runner.ts -> lib/model/engine/runner.ts (back into the folder that chooses it)",
    "lib/model/gpu/runner.ts -> lib/model/gpu/helper.ts",
  ]);
  // the runner beside its chooser, importing only the contract
  const gpuInEngine = join(LIB, "model/engine/gpu-runner.ts");
  const fixed = graph.slice(0, -1).map((e) => ({ from: e.from === gpu ? gpuInEngine : e.from, to: e.to === gpu ? gpuInEngine : e.to }));
  assert.deepEqual(backArrows([...all, gpuInEngine], fixed, runners, contract), []);
});

test("the chat message, its role and its tool call are declared once in lib/ (lib/core/messages.ts)", () => {
  for (const name of ["ChatMessage", "ChatRole", "ToolCall"]) {
    const homes = sourceFiles(LIB).filter((f) => new RegExp(`\\b(interface|type)\\s+${name}\\b(?!\\s*[,}])`).test(readFileSync(f, "utf8").replace(/import type \{[^}]*\}[^;]*;|export type \{[^}]*\}[^;]*;/g, "")));
    assert.deepEqual(homes.map((f) => relative(ROOT, f)), ["lib/core/messages.ts"], `${name} declared in more than one place`);
  }
});
