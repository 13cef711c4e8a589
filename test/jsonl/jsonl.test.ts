import { test } from "node:test";
import assert from "node:assert/strict";
import { parseJsonl } from "../../lib/jsonl.js";
import { isT2sError } from "../../lib/errors.js";

test("parses lines and skips blanks", () => {
  const r = parseJsonl('{"a":1}\n\n{"a":2}\n', "f.jsonl");
  assert.deepEqual(r.records, [{ a: 1 }, { a: 2 }]);
  assert.equal(r.tornTail, false);
});

test("a torn last line is ignored and flagged", () => {
  const r = parseJsonl('{"a":1}\n{"a":', "f.jsonl");
  assert.deepEqual(r.records, [{ a: 1 }]);
  assert.equal(r.tornTail, true);
});

test("a malformed middle line throws naming file and line", () => {
  assert.throws(() => parseJsonl('{"a":1}\nnope\n{"a":2}\n', "f.jsonl"), (e) => isT2sError(e, "bad_jsonl") && /f\.jsonl:2/.test(e.message));
});

test("skipBad lists malformed lines instead of throwing", () => {
  const r = parseJsonl('{"a":1}\nnope\n{"a":2}\n', "f.jsonl", { skipBad: true });
  assert.equal(r.records.length, 2);
  assert.deepEqual(r.bad.map((b) => b.line), [2]);
});
