import { test } from "node:test";
import assert from "node:assert/strict";
import { mulberry32, mulberry32Next } from "../../lib/core/random.js";

test("mulberry32 gives the reference stream for seed 0 and 42", () => {
  // first outputs of mulberry32 as computed by an independent implementation (Python, 32-bit arithmetic)
  const a = mulberry32(0);
  assert.deepEqual([a(), a(), a()].map((x) => Math.round(x * 1e9)), [266429209, 329746, 223272027]);
  const step = mulberry32Next(42);
  assert.equal(step.state, (42 + 0x6d2b79f5) >>> 0);
  assert.equal(mulberry32(42)(), step.value);
});
