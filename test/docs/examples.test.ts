/**
 * Every code block of README.md, environment.md and docs/*.md is a test (test/docs/extract.ts says how a
 * block is marked). Blocks run in a scratch copy of a clone: data/, configs/ and notebooks/ copied, the
 * rest linked, plus the inputs the examples name (a rows file, a report with a figure, requests.jsonl),
 * with `t2s` and `npx t2s` running this checkout's bin/t2s.js. TypeScript examples run as a user's script
 * there (`npx tsx`), so an import of `t2s-lab/lib/...` resolves through package.json "exports".
 */
import { test, before } from "node:test";
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { chmodSync, cpSync, existsSync, mkdirSync, readdirSync, readFileSync, symlinkSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import ts from "typescript";
import { saveFigure } from "../../lib/report/store.js";
import { pass1ByGroupFigure } from "../../lib/report/figures.js";
import { HANG_GUARD_MS, needsChromium, repoRoot, scratchDir, t2sBin } from "../helpers.js";
import { makeRows, writeRows } from "../report/fixtures.js";
import { extractBlocks, shellCommands, synopsisLines, t2sArgs, type DocBlock } from "./extract.js";

const DOCS = ["README.md", "environment.md", ...readdirSync(join(repoRoot, "docs")).filter((f) => f.endsWith(".md")).sort().map((f) => `docs/${f}`)];
const blocks = DOCS.flatMap((f) => extractBlocks(join(repoRoot, f)).map((b) => ({ ...b, file: f })));
const where = (b: DocBlock) => `${b.file}:${b.line}`;

/**
 * Top-level entries of the clone copied into the scratch folder (the examples may write beside them); the
 * rest are linked, node_modules entry by entry (so that nothing an example does to the folder reaches the clone's).
 */
const COPIED = new Set(["package.json", "data", "configs", "notebooks"]);
/** Top-level entries a user's runs create: never linked, so an example writes them in the scratch folder. */
const OUTPUTS = new Set(["out", "reports", "runs", ".git"]);

let scratch = "";

/** A folder that looks like a clone after a first run, with `t2s` and `npx t2s` on PATH running this checkout. */
function makeScratch(): string {
  const dir = scratchDir("t2s-docs-");
  for (const name of readdirSync(repoRoot)) {
    if (OUTPUTS.has(name)) continue;
    if (COPIED.has(name)) cpSync(join(repoRoot, name), join(dir, name), { recursive: true });
    else if (name === "node_modules") {
      mkdirSync(join(dir, name));
      for (const entry of readdirSync(join(repoRoot, name))) symlinkSync(join(repoRoot, name, entry), join(dir, name, entry));
    } else symlinkSync(join(repoRoot, name), join(dir, name));
  }
  const bin = join(dir, ".examples-bin");
  mkdirSync(bin);
  const shim = (name: string, body: string) => {
    writeFileSync(join(bin, name), `#!/bin/sh\n${body}\n`);
    chmodSync(join(bin, name), 0o755);
  };
  shim("t2s", `exec "${process.execPath}" "${t2sBin}" "$@"`);
  // npm's own `npx t2s` in a clone links the clone into its cache first; here it runs the checkout directly
  shim("npx", `if [ "$1" = t2s ]; then shift; exec "${process.execPath}" "${t2sBin}" "$@"; fi\nexec "${join(dirname(process.execPath), "npx")}" "$@"`);
  // what the examples read as the user's own files
  writeRows(join(mkdir(dir, "out/benchmark"), "shop-sql-4m.jsonl"), makeRows({ tasks: 12 }).map((r) => ({ ...r, db_id: "shop" })));
  saveFigure(mkdir(dir, "reports"), "01-pass1-by-difficulty", pass1ByGroupFigure(makeRows({ tasks: 12 }), "difficulty"));
  saveFigure(join(dir, "reports"), "05-pass1-by-difficulty", pass1ByGroupFigure(makeRows({ tasks: 12, lift: 0.2 }), "difficulty"));
  const db = "data/shop/shop.sqlite";
  writeFileSync(join(dir, "requests.jsonl"), [
    { db, gold: "SELECT COUNT(*) FROM orders", pred: "```sql\nSELECT count(*) FROM orders\n```" },
    { db, gold: "SELECT COUNT(*) FROM orders", pred: "SELECT 1", reply: false },
  ].map((l) => JSON.stringify(l)).join("\n") + "\n");
  writeFileSync(join(dir, "pairs.jsonl"), JSON.stringify({ db, gold: 'SELECT name FROM customers WHERE city = "Lyon"', pred: "SELECT name FROM customers WHERE city = 'Lyon'", reply: false }) + "\n");
  return dir;
}

function mkdir(root: string, rel: string): string {
  const p = join(root, rel);
  mkdirSync(p, { recursive: true });
  return p;
}

function inScratch(cmd: string, args: string[], input?: string) {
  return spawnSync(cmd, args, {
    cwd: scratch, input, encoding: "utf8", timeout: HANG_GUARD_MS,
    env: { ...process.env, PATH: `${join(scratch, ".examples-bin")}:${process.env.PATH}`, NODE_TEST_CONTEXT: "" },
  });
}

type ParseRequest = { argv?: string[]; command?: string[] };
type ParseAnswer = { ok?: boolean; error?: string; options?: string[] };
/** What a block asks the parser (test/docs/parse-only.ts), and how its answers become problems. */
interface ParsePlan {
  requests: ParseRequest[];
  problems: (answers: ParseAnswer[]) => string[];
}

/** A checked shell block: each t2s command parses; each npm script and bash/node script it names exists. */
function planShell(b: DocBlock): ParsePlan {
  const found: string[] = [];
  const argvs: string[][] = [];
  const scripts = JSON.parse(readFileSync(join(repoRoot, "package.json"), "utf8")).scripts as Record<string, string>;
  for (const words of shellCommands(b.code)) {
    const args = t2sArgs(words);
    if (args) argvs.push(args);
    else if (words[0] === "npm" && words[1] === "run" && words[2] && !scripts[words[2]]) found.push(`npm run ${words[2]}: no such script`);
    else if (words[0] === "npm" && ["start", "test"].includes(words[1]) && !scripts[words[1]]) found.push(`npm ${words[1]}: no such script`);
    else if ((words[0] === "bash" || words[0] === "node") && /^scripts\//.test(words[1] ?? "") && !existsSync(join(repoRoot, words[1]))) found.push(`${words[1]} does not exist`);
  }
  return {
    requests: argvs.map((argv) => ({ argv })),
    problems: (answers) => [...found, ...answers.flatMap((r, i) => (r.ok ? [] : [`t2s ${argvs[i].join(" ")}: ${r.error}`]))],
  };
}

/** A synopsis: every command and --flag it names exists. */
function planSynopsis(b: DocBlock): ParsePlan {
  const lines = synopsisLines(b.code);
  const paths = lines.map((l) => l.split(/\s+/).slice(1).filter((w, i, ws) => ws.slice(0, i + 1).every((x) => /^[a-z][\w-]*$/.test(x))));
  return {
    requests: paths.map((command) => ({ command })),
    problems: (answers) => [
      ...(lines.length ? [] : ["no `t2s` line in a synopsis block"]),
      ...answers.flatMap((r, i) => (r.error ? [r.error] : (lines[i].match(/(?<![\w-])--?[a-zA-Z][\w-]*/g) ?? []).filter((f) => !r.options!.includes(f)).map((f) => `t2s ${paths[i].join(" ")}: no flag ${f}`))),
    ],
  };
}

/** The problems of every checked shell block and synopsis, parsed in one child process (each start loads every command). */
function checkAll(list: DocBlock[]): Map<DocBlock, string[]> {
  const plans = list.map((b) => [b, b.mode === "synopsis" ? planSynopsis(b) : planShell(b)] as const);
  const requests = plans.flatMap(([, p]) => p.requests);
  let answers: ParseAnswer[] = [];
  if (requests.length) {
    const r = inScratch(process.execPath, ["--import", "tsx", join(repoRoot, "test/docs/parse-only.ts")], JSON.stringify(requests));
    assert.equal(r.status, 0, r.stderr);
    answers = JSON.parse(r.stdout);
  }
  const out = new Map<DocBlock, string[]>();
  let at = 0;
  for (const [b, p] of plans) {
    out.set(b, p.problems(answers.slice(at, at + p.requests.length)));
    at += p.requests.length;
  }
  return out;
}

/** A TypeScript example compiles (syntax) and its imports resolve as they would for a script in the clone. */
function checkTypeScript(b: DocBlock): string[] {
  const out = ts.transpileModule(b.code, { reportDiagnostics: true, compilerOptions: { module: ts.ModuleKind.ESNext, target: ts.ScriptTarget.ES2022 } });
  const problems = (out.diagnostics ?? []).map((d) => ts.flattenDiagnosticMessageText(d.messageText, "\n"));
  for (const [, spec] of b.code.matchAll(/from\s+"([^"]+)"/g)) {
    if (spec.startsWith("./")) {
      if (![spec, spec.replace(/\.js$/, ".ts")].some((p) => existsSync(join(scratch, p)))) problems.push(`${spec} does not exist`);
    } else if (!spec.startsWith("node:")) {
      const r = inScratch(process.execPath, ["--input-type=module", "-e", `import.meta.resolve(${JSON.stringify(spec)})`]);
      if (r.status !== 0) problems.push(`${spec} does not resolve: ${r.stderr.trim().split("\n").find((l) => /Error/.test(l)) ?? r.stderr}`);
    }
  }
  return problems;
}

/** Why a block that runs cannot run here, when it needs something this machine lacks. */
function runSkip(b: DocBlock): string | false {
  return /figures export/.test(b.code) ? needsChromium() : false;
}

let parsed = new Map<DocBlock, string[]>();
before(() => {
  scratch = makeScratch();
  parsed = checkAll(blocks.filter((b) => b.mode === "synopsis" || (b.mode === "check" && b.lang !== "ts")));
});

test("every code block in README.md, environment.md and docs/ names its language (text for output)", () => {
  const bare = blocks.filter((b) => b.lang === "").map(where);
  assert.deepEqual(bare, [], "tag these blocks: sh, ts, json, python, or text");
  const unknown = blocks.filter((b) => !["", "text", "sh", "bash", "ts", "json", "python"].includes(b.lang)).map((b) => `${where(b)} ${b.lang}`);
  assert.deepEqual(unknown, []);
  assert.deepEqual(blocks.filter((b) => b.mode === "check" && !b.reason).map(where), [], "a check marker says why the block does not run");
});

for (const b of blocks.filter((x) => x.mode !== "text" && x.lang !== "")) {
  const name = `${where(b)} (${b.lang}${b.mode === "run" ? "" : `, ${b.mode}${b.reason ? `: ${b.reason}` : ""}`})`;
  if (b.lang === "json") {
    test(`${name} parses`, () => assert.doesNotThrow(() => JSON.parse(b.code)));
  } else if (b.lang === "python") {
    const python = spawnSync("python3", ["--version"]).status === 0;
    test(`${name} is valid Python`, { skip: python ? false : "python3 is not installed" }, () => {
      const r = spawnSync("python3", ["-c", "import ast, sys; ast.parse(sys.stdin.read())"], { input: b.code, encoding: "utf8", timeout: HANG_GUARD_MS });
      assert.equal(r.status, 0, r.stderr);
    });
  } else if (b.mode === "synopsis") {
    test(`${name}: every command and flag exists`, () => assert.deepEqual(parsed.get(b), []));
  } else if (b.mode === "check") {
    test(`${name}: parses`, () => assert.deepEqual(b.lang === "ts" ? checkTypeScript(b) : parsed.get(b), []));
  } else if (b.lang === "ts") {
    test(`${name} runs`, { skip: runSkip(b) }, () => {
      const file = join(scratch, `example-${b.file.replace(/\W/g, "-")}-${b.line}.ts`);
      writeFileSync(file, b.code);
      const r = inScratch(process.execPath, ["--import", "tsx", file]);
      assert.equal(r.status, 0, `exit ${r.status}\n${r.stdout}\n${r.stderr}`);
    });
  } else {
    test(`${name} runs`, { skip: runSkip(b) }, () => {
      const r = inScratch("bash", ["-e", "-o", "pipefail", "-c", b.code]);
      assert.equal(r.status, 0, `exit ${r.status}\n${r.stdout.slice(-2000)}\n${r.stderr.slice(-2000)}`);
    });
  }
}
