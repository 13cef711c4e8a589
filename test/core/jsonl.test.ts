import { test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { gzipSync } from "node:zlib";
import { appendJsonl, parseJsonl, readJsonl } from "../../lib/core/jsonl.js";
import { repoRoot, scratchDir } from "../helpers.js";
import { canLimitFileSize, runWithFileSizeLimit } from "../support/file-size-limit.js";
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

test("an append whose write fails midway leaves the file as it was, and the next append lands on a clean line", { skip: (await canLimitFileSize()) ? false : "needs bash's ulimit -f" }, async () => {
  const dir = scratchDir();
  const path = join(dir, "log.jsonl");
  // 1 KiB limit: the file holds 900 bytes, so a 500-byte record is written in part, then the write fails
  const before = JSON.stringify({ step: 0, pad: "x".repeat(900 - 20) }) + "\n";
  assert.equal(before.length, 900);
  writeFileSync(path, before);
  const script = join(dir, "append.mts");
  writeFileSync(script, [
    `import { appendJsonl } from ${JSON.stringify(join(repoRoot, "lib/core/jsonl.ts"))};`,
    `try { appendJsonl(${JSON.stringify(path)}, [{ step: 1, pad: "y".repeat(480) }]); console.log("appended"); }`,
    `catch (e) { console.log("failed", e.code); }`,
  ].join("\n"));
  const r = await runWithFileSizeLimit(1, process.execPath, ["--import", "tsx", script], { cwd: repoRoot });
  assert.equal(r.code, 0, r.stderr);
  assert.equal(r.stdout.trim(), "failed EFBIG", "the write failed midway");
  assert.equal(readFileSync(path, "utf8"), before, "the part written before the failure is cut off");
  appendJsonl(path, [{ step: 1 }]);
  assert.deepEqual(readJsonl(path).records, [JSON.parse(before), { step: 1 }]);
});
