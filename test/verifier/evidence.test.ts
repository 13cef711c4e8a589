import { test } from "node:test";
import assert from "node:assert/strict";
import { evidencePieces, skippedEvidenceRules } from "../../lib/verifier/evidence.js";

test("evidence splits on semicolons and drops blanks", () => {
  assert.deepEqual(evidencePieces("a = 1; ;b refers to c;"), ["a = 1", "b refers to c"]);
  assert.deepEqual(evidencePieces(undefined), []);
  assert.deepEqual(evidencePieces(" ; "), []);
});

test("rules: requirement in the first two turns, verification in the answer turn", () => {
  const ev = "x refers to y";
  const req = "Requirement of external knowledge 1 (x refers to y)";
  const ver = "verification of external knowledge 1: used y";
  assert.equal(skippedEvidenceRules(ev, [req, `${ver}\n<solution>SELECT 1</solution>`]), 0);
  assert.equal(skippedEvidenceRules(ev, ["thinking", req, `${ver} SELECT 1`]), 0);
  assert.equal(skippedEvidenceRules(ev, ["a", "b", `${req} ${ver}`]), 1, "a requirement after turn 2 is late");
  assert.equal(skippedEvidenceRules(ev, [req, "SELECT 1"]), 1);
  assert.equal(skippedEvidenceRules(ev, ["a", "SELECT 1"]), 2);
  assert.equal(skippedEvidenceRules(ev, ["SELECT 1"]), 1, "one turn with neither block");
  assert.equal(skippedEvidenceRules(ev, [`${req} SELECT 1`]), 0);
  assert.equal(skippedEvidenceRules("", ["SELECT 1"]), 0, "no evidence, no rules");
});
