import { test } from "node:test";
import assert from "node:assert/strict";
import { fmt, fmtCI, fmtP, fmtSigned, formatTable } from "../../lib/stats/format.js";

test("tables align: text columns left, numbers right", () => {
  const t = formatTable(["name", "tasks", "ci"], [["easy", "5", "[0.100, 0.200]"], ["medium", "120", "-"]], ["name", "ci"]);
  assert.equal(t, "name    tasks  ci\neasy        5  [0.100, 0.200]\nmedium    120  -\n");
});

test("number formats", () => {
  assert.equal(fmt(0.12345), "0.123");
  assert.equal(fmt(null), "-");
  assert.equal(fmtSigned(0.05), "+0.050");
  assert.equal(fmtSigned(-0.02), "-0.020");
  assert.equal(fmtSigned(-0.0001), "-0.000");
  assert.equal(fmtCI([-0.1, 0.2], 2, true), "[-0.10, +0.20]");
  assert.equal(fmtCI(null), "-");
  assert.equal(fmtP(0.00001), "<0.0001");
  assert.equal(fmtP(0.04321), "0.0432");
});
