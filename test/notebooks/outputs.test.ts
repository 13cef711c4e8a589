import { test } from "node:test";
import assert from "node:assert/strict";
import type { CodeCell } from "../../lib/notebooks/nbformat.js";
import { errorFromStderr, OutputCollector } from "../../lib/notebooks/outputs.js";
import { newMessage } from "../../lib/notebooks/protocol.js";

function cell(): CodeCell {
  return { cell_type: "code", id: "x", metadata: {}, source: "", execution_count: null, outputs: [] };
}
const msg = (type: string, content: Record<string, unknown>) => newMessage("s", type, content);

test("consecutive stream chunks of one stream merge; stdout and stderr stay apart", () => {
  const c = cell();
  const col = new OutputCollector();
  col.handle(c, msg("stream", { name: "stdout", text: "a" }));
  col.handle(c, msg("stream", { name: "stdout", text: "b\n" }));
  col.handle(c, msg("stream", { name: "stderr", text: "warn\n" }));
  col.handle(c, msg("stream", { name: "stdout", text: "c\n" }));
  assert.deepEqual(c.outputs, [
    { output_type: "stream", name: "stdout", text: "ab\n" },
    { output_type: "stream", name: "stderr", text: "warn\n" },
    { output_type: "stream", name: "stdout", text: "c\n" },
  ]);
});

test("update_display_data rewrites every output with that display id, also in earlier cells; transient is not stored", () => {
  const first = cell();
  const second = cell();
  const col = new OutputCollector();
  col.handle(first, msg("display_data", { data: { "text/html": "<i>0%</i>" }, metadata: {}, transient: { display_id: "p" } }));
  col.handle(first, msg("display_data", { data: { "text/plain": "other" }, metadata: {}, transient: {} }));
  col.handle(second, msg("update_display_data", { data: { "text/html": "<i>100%</i>" }, metadata: { a: 1 }, transient: { display_id: "p" } }));
  col.handle(second, msg("execute_result", { execution_count: 3, data: { "text/plain": "3" }, metadata: {} }));
  assert.deepEqual(first.outputs[0], { output_type: "display_data", data: { "text/html": "<i>100%</i>" }, metadata: { a: 1 } });
  assert.deepEqual(first.outputs[1], { output_type: "display_data", data: { "text/plain": "other" }, metadata: {} });
  assert.deepEqual(second.outputs, [{ output_type: "execute_result", execution_count: 3, data: { "text/plain": "3" }, metadata: {} }]);
});

test("clear_output clears now, or before the next output when wait is set", () => {
  const c = cell();
  const col = new OutputCollector();
  col.handle(c, msg("stream", { name: "stdout", text: "1\n" }));
  col.handle(c, msg("clear_output", { wait: true }));
  assert.equal(c.outputs.length, 1);
  col.handle(c, msg("stream", { name: "stdout", text: "2\n" }));
  assert.deepEqual(c.outputs, [{ output_type: "stream", name: "stdout", text: "2\n" }]);
  col.handle(c, msg("clear_output", { wait: false }));
  assert.deepEqual(c.outputs, []);
});

test("errorFromStderr turns tslab's type diagnostics into a TypeScriptError and folds stderr into it", () => {
  const c = cell();
  c.outputs = [
    { output_type: "stream", name: "stdout", text: "kept\n" },
    { output_type: "stream", name: "stderr", text: "2:7 - Type 'string' is not assignable to type 'number'.\n" },
  ];
  const err = errorFromStderr(c, "fallback");
  assert.equal(err.ename, "TypeScriptError");
  assert.equal(err.evalue, "Type 'string' is not assignable to type 'number'.");
  assert.deepEqual(err.traceback, ["2:7 - Type 'string' is not assignable to type 'number'."]);
  assert.deepEqual(c.outputs, [{ output_type: "stream", name: "stdout", text: "kept\n" }]);
});

test("errorFromStderr finds the thrown error's name and message in a stack", () => {
  const c = cell();
  c.outputs = [{ output_type: "stream", name: "stderr", text: "evalmachine.<anonymous>:6\n  x()\n\nReferenceError: foo is not defined\n    at x\n" }];
  const err = errorFromStderr(c, "fallback");
  assert.equal(err.ename, "ReferenceError");
  assert.equal(err.evalue, "foo is not defined");
  const empty = errorFromStderr(cell(), "nothing printed");
  assert.deepEqual([empty.ename, empty.evalue], ["CellError", "nothing printed"]);
});
