import { test } from "node:test";
import assert from "node:assert/strict";
import { bootstrapCI, bootstrapMeans, percentileIndices } from "../../lib/stats/bootstrap.js";
import { mulberry32 } from "../../lib/core/random.js";
import { taskPass1 } from "../../lib/stats/summary.js";
import type { TaskCounts } from "../../lib/stats/rows.js";

test("the interval is read at floor(0.025 B) and floor(0.975 B) - 1 of the sorted means", () => {
  assert.deepEqual(percentileIndices(2000), [50, 1949]);
  assert.deepEqual(percentileIndices(500), [12, 486]);
  assert.deepEqual(percentileIndices(1000, 0.9), [50, 949]);
  const values = [0, 0.25, 0.5, 1, 1, 0.75, 0];
  const means = bootstrapMeans(values, 2000, 3);
  assert.deepEqual(bootstrapCI(values, { B: 2000, seed: 3 }), [means[50], means[1949]]);
  for (let i = 1; i < means.length; i++) assert.ok(means[i - 1] <= means[i]);
});

test("same values and seed give the same interval; another seed another one", () => {
  const rand = mulberry32(11);
  const values = Array.from({ length: 40 }, () => Math.round(rand() * 4) / 4);
  const a = bootstrapCI(values, { seed: 5 });
  const b = bootstrapCI(values, { seed: 5 });
  const c = bootstrapCI(values, { seed: 6 });
  assert.deepEqual(a, b);
  assert.notDeepEqual(a, c);
  assert.ok(a && a[0] < a[1]);
});

test("no interval below 3 values; a constant gives a zero-width interval", () => {
  assert.equal(bootstrapCI([]), null);
  assert.equal(bootstrapCI([1, 0]), null);
  assert.deepEqual(bootstrapCI([0.5, 0.5, 0.5]), [0.5, 0.5]);
});

test("the pass@1 interval covers the true rate 95% +- 2% of the time", () => {
  // 2000 simulated benchmarks of 60 tasks x 4 samples; task rates theta = U^1.5 (mean 0.4). With 2000
  // replications the coverage estimate has SE sqrt(.95 * .05 / 2000) = 0.0049. The percentile interval's
  // true coverage at this size is ~0.945 (0.9452 over 10000 replications), 3 SE inside the +-0.02 band:
  // a correct implementation fails this check with probability ~0.2%; a 90% or 99% interval never passes.
  const replications = 2000;
  const tasks = 60;
  const samples = 4;
  const truth = 1 / 2.5;
  const rand = mulberry32(2024);
  let covered = 0;
  for (let r = 0; r < replications; r++) {
    const counts: TaskCounts[] = [];
    for (let i = 0; i < tasks; i++) {
      const theta = rand() ** 1.5;
      let c = 0;
      for (let s = 0; s < samples; s++) if (rand() < theta) c++;
      counts.push({ task_id: String(i), n: samples, c });
    }
    const ci = bootstrapCI(taskPass1(counts), { B: 500, seed: r });
    assert.ok(ci);
    if (ci[0] <= truth && truth <= ci[1]) covered++;
  }
  const coverage = covered / replications;
  assert.ok(Math.abs(coverage - 0.95) <= 0.02, `coverage ${coverage}`);
});
