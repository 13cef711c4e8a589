import { test } from "node:test";
import assert from "node:assert/strict";
import { HOLDOUT_FRACTION, normalizeQuestion, splitFor, splitPoint, taskId } from "../../lib/tasks/split.js";

test("ids hash the normalised question and the db", () => {
  assert.match(taskId("How many?", "shop"), /^t2s_[0-9a-f]{12}$/);
  assert.equal(taskId("  How   MANY?\n", "shop"), taskId("how many?", "shop"));
  assert.notEqual(taskId("how many?", "shop"), taskId("how many?", "other"));
  assert.equal(normalizeQuestion(" A\tB  c "), "a b c");
});

test("split follows the documented formula", () => {
  for (let i = 0; i < 200; i++) {
    const id = taskId(`question ${i}`, "db");
    assert.equal(splitFor(id), splitPoint(id) < HOLDOUT_FRACTION ? "holdout" : "train");
    assert.ok(splitPoint(id) >= 0 && splitPoint(id) < 1);
  }
});

test("adding tasks never moves an old task between splits", () => {
  const old = Array.from({ length: 300 }, (_, i) => taskId(`old question number ${i}`, "shop"));
  const before = new Map(old.map((id) => [id, splitFor(id)]));
  const added = Array.from({ length: 700 }, (_, i) => taskId(`new question number ${i}`, "shop"));
  const all = [...added.slice(0, 350), ...old, ...added.slice(350)];
  const after = new Map(all.map((id) => [id, splitFor(id)]));
  for (const id of old) assert.equal(after.get(id), before.get(id));
});

test("holdout share is near 20% over many ids", () => {
  const ids = Array.from({ length: 5000 }, (_, i) => taskId(`q${i}`, "db"));
  const share = ids.filter((id) => splitFor(id) === "holdout").length / ids.length;
  assert.ok(share > 0.18 && share < 0.22, `share ${share}`);
});
