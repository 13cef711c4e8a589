import { test } from "node:test";
import assert from "node:assert/strict";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { isT2sError } from "../../lib/core/errors.js";
import { prepareForRun, readNotebook, splitLines, validateNotebook, type Notebook } from "../../lib/notebooks/nbformat.js";
import { scratchDir } from "../helpers.js";
import { writeNotebook } from "./fixtures.js";

test("prepareForRun gives unique valid ids, clears outputs and counts, sets the tslab kernelspec", () => {
  const dir = scratchDir();
  const path = writeNotebook(dir, "old", ["1", { source: "# hi", type: "markdown" }, "2"]);
  const raw = readNotebook(path);
  raw.cells[2].id = "dup";
  raw.cells[0].id = "dup";
  const nb = prepareForRun(raw);
  const ids = nb.cells.map((c) => c.id);
  assert.equal(new Set(ids).size, 3);
  assert.equal(ids[0], "dup");
  for (const c of nb.cells) if (c.cell_type === "code") assert.deepEqual([c.execution_count, c.outputs], [null, []]);
  assert.equal(nb.nbformat_minor, 5);
  assert.equal((nb.metadata.kernelspec as { name: string }).name, "tslab");
  assert.deepEqual(validateNotebook(nb), []);
});

test("readNotebook names the file when it is not a notebook", () => {
  const dir = scratchDir();
  const bad = join(dir, "bad.ipynb");
  writeFileSync(bad, "{ not json");
  assert.throws(() => readNotebook(bad), (e) => isT2sError(e, "bad_notebook") && e.message.includes(bad));
  writeFileSync(bad, JSON.stringify({ nbformat: 3, worksheets: [] }));
  assert.throws(() => readNotebook(bad), /nbformat 4/);
});

test("validateNotebook reports missing ids, duplicates, bad outputs and transient keys", () => {
  const nb = {
    nbformat: 4,
    nbformat_minor: 4,
    metadata: {},
    cells: [
      { cell_type: "code", id: "a", metadata: {}, source: "", execution_count: null, outputs: [{ output_type: "display_data", data: {}, metadata: {}, transient: {} }] },
      { cell_type: "code", id: "a", metadata: {}, source: "", execution_count: "1", outputs: [{ output_type: "stream", name: "x", text: "" }] },
      { cell_type: "markdown", metadata: {}, source: "", outputs: [] },
    ],
  } as unknown as Notebook;
  const errs = validateNotebook(nb).join("\n");
  for (const want of [/nbformat_minor/, /cell 1 output 1: transient/, /cell 2: duplicate id/, /cell 2: execution_count/, /stream name/, /cell 3: id missing/, /cell 3: a markdown cell cannot/]) {
    assert.match(errs, want);
  }
});

test("splitLines keeps the newlines the way Jupyter stores source", () => {
  assert.deepEqual(splitLines("a\nb\n\nc"), ["a\n", "b\n", "\n", "c"]);
  assert.deepEqual(splitLines(""), []);
});
