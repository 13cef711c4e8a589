/**
 * Notebooks import lib/ through tslab, which type-checks it with its own TypeScript 5.0 and fixed,
 * non-strict options (tsconfig.json is ignored). Code that passes `tsc --strict` can still fail there
 * (e.g. narrowing a union with `!x.ok`), so the whole of lib/ is checked under tslab's compiler here.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { createRequire } from "node:module";
import { readdirSync, statSync } from "node:fs";
import { join, relative } from "node:path";
import { repoRoot } from "../helpers.js";

function tsFiles(dir: string): string[] {
  return readdirSync(dir).flatMap((name) => {
    const p = join(dir, name);
    if (statSync(p).isDirectory()) return tsFiles(p);
    return name.endsWith(".ts") ? [p] : [];
  });
}

test("every lib file type-checks under tslab's TypeScript and options", () => {
  const ts = createRequire(join(repoRoot, "package.json"))("@tslab/typescript-for-tslab");
  // the options tslab's converter uses (src/converter.ts), minus emit
  const options = {
    module: ts.ModuleKind.ESNext,
    moduleResolution: ts.ModuleResolutionKind.Node10,
    target: ts.ScriptTarget.ES2022,
    lib: ["lib.es2022.d.ts"],
    esModuleInterop: true,
    experimentalDecorators: true,
    resolveJsonModule: true,
    jsx: ts.JsxEmit.React,
    allowJs: true,
    checkJs: true,
    skipLibCheck: true,
    noEmit: true,
  };
  const program = ts.createProgram(tsFiles(join(repoRoot, "lib")), options);
  const problems = ts.getPreEmitDiagnostics(program).map((d: any) => {
    const where = d.file ? `${relative(repoRoot, d.file.fileName)}:${d.file.getLineAndCharacterOfPosition(d.start).line + 1}` : "";
    return `${where} ${ts.flattenDiagnosticMessageText(d.messageText, " ")}`;
  });
  assert.equal(ts.version.startsWith("5.0"), true, `tslab's compiler is ${ts.version}`);
  assert.deepEqual(problems, []);
});
