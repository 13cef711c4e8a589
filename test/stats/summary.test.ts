import { test } from "node:test";
import assert from "node:assert/strict";
import { defaultK, passAtKCurve, summarize, taskPassRates } from "../../lib/stats/summary.js";
import { passAtK, passPowK } from "../../lib/stats/estimators.js";
import { bootstrapCI } from "../../lib/stats/bootstrap.js";
import { countRows, shuffled, simulateRows } from "./fixtures.js";
import type { StatRow } from "../../lib/stats/rows.js";

const close = (a: number | null, b: number, tol = 1e-12) => assert.ok(a !== null && Math.abs(a - b) <= tol, `${a} != ${b}`);

// tasks (n, c): a 4/2, b 4/0, c 4/4, d 6/1 -> k = 4 by default
const hand: StatRow[] = [
  ...countRows("a", 4, 2, { difficulty: "easy" }),
  ...countRows("b", 4, 0, { difficulty: "hard" }),
  ...countRows("c", 4, 4, { difficulty: "easy" }),
  ...countRows("d", 6, 1, { difficulty: "hard" }),
];

test("pass@1, pass@k, pass^k and headroom of a hand-made file", () => {
  const s = summarize(hand);
  assert.equal(s.n_tasks, 4);
  assert.equal(s.n_rows, 18);
  assert.equal(s.k, 4);
  close(s.pass1, (0.5 + 0 + 1 + 1 / 6) / 4);
  const passk = (passAtK(4, 2, 4) + 0 + 1 + passAtK(6, 1, 4)) / 4; // 1, 0, 1, 1 - C(5,4)/C(6,4) = 2/3
  close(s.passk, (1 + 0 + 1 + 2 / 3) / 4);
  close(s.passk, passk);
  close(s.powk, (0 + 0 + 1 + 0) / 4);
  close(s.headroom, (1 + 0 + 1 + 2 / 3) / 4 - (0.5 + 0 + 1 + 1 / 6) / 4);
  assert.deepEqual(s.pass1_ci, bootstrapCI([0.5, 0, 1, 1 / 6], { seed: 0 }));
  assert.deepEqual(s.by, {});
});

test("tasks with fewer than k samples are left out of pass@k and pass^k only", () => {
  const s = summarize(hand, { k: 5 });
  assert.equal(s.k, 5);
  close(s.passk, passAtK(6, 1, 5)); // only task d has 6 >= 5 samples
  close(s.powk, passPowK(6, 1, 5));
  assert.equal(s.passk_ci, null); // one task: no interval
  close(s.pass1, (0.5 + 0 + 1 + 1 / 6) / 4);
  const none = summarize(hand, { k: 7 });
  assert.equal(none.passk, null);
  assert.equal(none.headroom, null);
});

test("k defaults to the smallest per-run sample count, and is null below 2", () => {
  assert.equal(defaultK(hand), 4);
  assert.equal(defaultK([...hand, ...countRows("e", 1, 1)]), null);
  assert.equal(summarize(countRows("x", 1, 0)).k, null);
  const threeRuns = simulateRows({ rates: [0.2, 0.5, 0.9], samples: 4, runs: 3 });
  assert.equal(defaultK(threeRuns), 4);
});

test("eval runs pool into each task's counts: pass@1 = mean over tasks of c_i / n_i", () => {
  const rows = simulateRows({ rates: [0.1, 0.5, 0.7, 0.9, 0.3], samples: 3, runs: 2, seed: 9 });
  const rates = taskPassRates(rows);
  assert.equal(rates.length, 5);
  assert.ok(rates.every((t) => t.n === 6));
  const s = summarize(rows);
  close(s.pass1, rates.reduce((a, t) => a + t.c / t.n, 0) / 5);
  close(s.passk, rates.reduce((a, t) => a + passAtK(t.n, t.c, 3), 0) / 5);
  assert.equal(s.k, 3);
});

test("by-group numbers use the overall k and carry task counts", () => {
  const s = summarize(hand, { by: ["difficulty"] });
  assert.deepEqual(Object.keys(s.by.difficulty), ["easy", "hard"]);
  const easy = s.by.difficulty.easy;
  assert.equal(easy.n_tasks, 2);
  assert.equal(easy.n_rows, 8);
  assert.equal(easy.k, 4);
  close(easy.pass1, 0.75);
  const hard = s.by.difficulty.hard;
  close(hard.passk, (0 + passAtK(6, 1, 4)) / 2);
  const missing = summarize([...hand, ...countRows("z", 4, 1)], { by: ["difficulty"] });
  assert.equal(missing.by.difficulty["(missing)"].n_tasks, 1);
});

test("the same rows in another order give identical output; another seed changes only intervals", () => {
  const rows = simulateRows({ rates: Array.from({ length: 30 }, (_, i) => i / 30), samples: 5, runs: 2, fields: (i) => ({ archetype: `a${i % 4}` }) });
  const base = JSON.stringify(summarize(rows, { by: ["archetype"], B: 400, seed: 3 }));
  assert.equal(JSON.stringify(summarize(shuffled(rows, 1), { by: ["archetype"], B: 400, seed: 3 })), base);
  assert.equal(JSON.stringify(summarize(shuffled(rows, 2), { by: ["archetype"], B: 400, seed: 3 })), base);
  const other = summarize(rows, { by: ["archetype"], B: 400, seed: 4 });
  const again = JSON.parse(base);
  assert.equal(other.pass1, again.pass1);
  assert.notDeepEqual(other.pass1_ci, again.pass1_ci);
});

test("pass@k curve from k = 1 to the largest sample count", () => {
  const curve = passAtKCurve(hand);
  assert.equal(curve.length, 6);
  close(curve[0].passk, (0.5 + 0 + 1 + 1 / 6) / 4);
  close(curve[3].passk, (1 + 0 + 1 + 2 / 3) / 4);
  assert.equal(curve[5].n_tasks, 1);
  for (let i = 1; i < curve.length - 2; i++) assert.ok((curve[i].passk as number) >= (curve[i - 1].passk as number));
});

test("group values are plain keys, even odd ones", () => {
  const rows = [...countRows("a", 2, 1, { style: "__proto__" }), ...countRows("b", 2, 2, { style: 3 }), ...countRows("c", 2, 0, { style: true })];
  const s = summarize(rows, { by: ["style"] });
  assert.deepEqual(Object.keys(s.by.style).sort(), ["3", "__proto__", "true"]);
  assert.equal(s.by.style["__proto__"].n_tasks, 1);
  assert.equal(JSON.parse(JSON.stringify(s)).by.style.__proto__.pass1, 0.5);
});

test("rows passed in code are validated too", () => {
  assert.throws(() => summarize([{ task_id: "a", sample: 0, correct: "true" } as unknown as StatRow]), /rows\[0\]: correct must be/);
  assert.throws(() => summarize([{ sample: 0, correct: true } as unknown as StatRow]), /task_id must be a string/);
  assert.equal(summarize([{ task_id: 7, sample: 0, correct: 1 } as unknown as StatRow]).pass1, 1);
});
