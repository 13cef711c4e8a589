import { test } from "node:test";
import assert from "node:assert/strict";
import { isT2sError } from "../../lib/core/errors.js";
import { prepareForRun, joinSource, type Notebook } from "../../lib/notebooks/nbformat.js";
import { injectParameters, parametersSource, parseParams } from "../../lib/notebooks/params.js";

function nb(cells: Array<{ source: string; tags?: string[] }>): Notebook {
  return prepareForRun({
    nbformat: 4,
    nbformat_minor: 5,
    metadata: {},
    cells: cells.map((c, i) => ({ cell_type: "code", id: `c${i}`, metadata: c.tags ? { tags: c.tags } : {}, source: c.source, execution_count: null, outputs: [] })),
  });
}

test("parseParams reads JSON values and keeps other text as strings", () => {
  assert.deepEqual(parseParams(["n=5", "s=hello", "b=true", "xs=[1,2]", "q=\"5\"", "e=a=b", "empty="]), {
    n: 5, s: "hello", b: true, xs: [1, 2], q: "5", e: "a=b", empty: "",
  });
});

test("parseParams rejects items without '=' and names that are not identifiers (usage errors)", () => {
  assert.throws(() => parseParams(["novalue"]), (e) => isT2sError(e, "usage") && /name=value/.test(e.message));
  assert.throws(() => parseParams(["1x=2"]), (e) => isT2sError(e, "usage") && /identifier/.test(e.message));
});

test("the injected cell goes right after the cell tagged 'parameters' and declares every value", () => {
  const book = nb([{ source: "import x from 'y'" }, { source: "let n = 1;\nconst s = 'a';", tags: ["parameters"] }, { source: "n" }]);
  const inj = injectParameters(book, { n: 5, s: "b", extra: null });
  assert.equal(inj.index, 2);
  assert.deepEqual(inj.unknown, ["extra"]);
  const cell = book.cells[2];
  assert.deepEqual(cell.metadata.tags, ["injected-parameters"]);
  assert.match(joinSource(cell.source), /let n = 5;\nlet s = "b";\nlet extra = null;/);
  assert.equal(book.cells.length, 4);
});

test("without a parameters cell the injected cell comes first; an old injected cell is replaced", () => {
  const book = nb([{ source: "let z = 0;", tags: ["injected-parameters"] }, { source: "console.log(1)" }]);
  const inj = injectParameters(book, { k: "v" });
  assert.equal(inj.index, 0);
  assert.equal(book.cells.length, 2);
  assert.match(joinSource(book.cells[0].source), /let k = "v";/);
  assert.doesNotMatch(joinSource(book.cells[0].source), /let z/);
});

test("no parameters: nothing injected", () => {
  const book = nb([{ source: "1" }]);
  assert.equal(injectParameters(book, {}).index, -1);
  assert.equal(book.cells.length, 1);
  assert.equal(parametersSource({ a: [1, "x"] }).split("\n")[1], 'let a = [1,"x"];');
});
