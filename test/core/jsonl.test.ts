import { test } from "node:test";
import assert from "node:assert/strict";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { gzipSync } from "node:zlib";
import { parseJsonl, readJsonl } from "../../lib/core/jsonl.js";
import { scratchDir } from "../helpers.js";
import { isT2sError } from "../../lib/core/errors.js";

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

test("readJsonl reads gzip-compressed files (.gz) and names a corrupt one", () => {
  const dir = scratchDir("jsonl-gz");
  const path = join(dir, "rows.jsonl.gz");
  writeFileSync(path, gzipSync(Buffer.from('{"a":1}\n{"a":2}\n')));
  assert.deepEqual(readJsonl(path).records, [{ a: 1 }, { a: 2 }]);
  const bad = join(dir, "bad.jsonl.gz");
  writeFileSync(bad, '{"a":1}\n');
  assert.throws(() => readJsonl(bad), (e: Error) => e.message.includes("bad.jsonl.gz") && e.message.includes("gzip"));
});
