import { test } from "node:test";
import assert from "node:assert/strict";
import { renderNotebookHtml } from "../../lib/notebooks/html.js";
import type { Notebook } from "../../lib/notebooks/nbformat.js";

const nb: Notebook = {
  nbformat: 4,
  nbformat_minor: 5,
  metadata: { t2s: { status: "failed", failed_cell: 2, failed_cell_id: "c2", params: { n: 3 }, duration_ms: 1500 } },
  cells: [
    { cell_type: "markdown", id: "m", metadata: {}, source: ["# Heading\n", "text"] },
    {
      cell_type: "code", id: "c1", metadata: { tags: ["parameters"] }, source: "let n = 1 < 2;", execution_count: 1,
      outputs: [
        { output_type: "stream", name: "stdout", text: "\u001b[33mhello\u001b[39m <tag>\n" },
        { output_type: "display_data", data: { "text/html": "<b id='raw'>raw html</b>", "text/plain": "x" }, metadata: {} },
        { output_type: "display_data", data: { "image/png": "iVBORw0KGgo=" }, metadata: {} },
        { output_type: "display_data", data: { "image/svg+xml": "<svg id='s'></svg>" }, metadata: {} },
        { output_type: "execute_result", execution_count: 1, data: { "text/plain": "42" }, metadata: {} },
      ],
    },
    { cell_type: "code", id: "c2", metadata: {}, source: "boom", execution_count: 2, outputs: [{ output_type: "error", ename: "E", evalue: "v", traceback: ["E: v", "  at <x>"] }] },
    { cell_type: "code", id: "c3", metadata: {}, source: "never", execution_count: null, outputs: [] },
  ],
};

test("the HTML page renders markdown, code, every output kind, and marks the failed and unrun cells", () => {
  const html = renderNotebookHtml(nb, { title: "demo <1>" });
  assert.match(html, /^<!DOCTYPE html>/);
  assert.match(html, /<title>demo &lt;1&gt;<\/title>/);
  assert.match(html, /failed at cell 2/);
  assert.match(html, /<h1 id="heading">Heading<\/h1>/);
  assert.match(html, /let n = 1 &lt; 2;/);
  assert.match(html, /<pre class="stdout">hello &lt;tag&gt;\n<\/pre>/, "ANSI codes stripped, text escaped");
  assert.match(html, /<b id='raw'>raw html<\/b>/, "text/html preferred over text/plain and inserted as is");
  assert.match(html, /src="data:image\/png;base64,iVBORw0KGgo="/);
  assert.match(html, /<svg id='s'><\/svg>/);
  assert.match(html, /Out\[1\]:/);
  assert.match(html, /class="cell code failed" id="cell-c2"/);
  assert.match(html, /<pre class="error">E: v\n  at &lt;x&gt;<\/pre>/);
  assert.match(html, /class="cell code not-run" id="cell-c3"/);
  assert.match(html, /tag-parameters/);
  assert.doesNotMatch(html, /<script src=|<link /, "no external resources");
});
