import { test } from "node:test";
import assert from "node:assert/strict";
import { compareRows, detectMarkers, pairTasks, pairedDelta } from "../../lib/stats/delta.js";
import { noiseBand, verdictFor } from "../../lib/stats/verdict.js";
import { signFlipTest } from "../../lib/stats/permutation.js";
import { detectableEffect, powerMultiplier, tasksNeeded } from "../../lib/stats/power.js";
import { bootstrapCI } from "../../lib/stats/bootstrap.js";
import { countRows, shuffled, simulateRows } from "./fixtures.js";
import type { StatRow } from "../../lib/stats/rows.js";

const close = (a: number | null, b: number, tol = 1e-12) => assert.ok(a !== null && Math.abs(a - b) <= tol, `${a} != ${b}`);

/** Rows of one task in one eval run with c of n correct. */
function runRows(taskId: string, run: string, n: number, c: number, extra: Record<string, unknown> = {}): StatRow[] {
  return countRows(taskId, n, c, { eval_run: run, ...extra });
}

/** p by enumerating all 2^n sign vectors. */
function brutePValue(d: number[]): number {
  const obs = Math.abs(d.reduce((a, b) => a + b, 0));
  let hits = 0;
  for (let mask = 0; mask < 2 ** d.length; mask++) {
    let s = 0;
    d.forEach((x, i) => (s += (mask >> i) & 1 ? -x : x));
    if (Math.abs(s) >= obs - 1e-9) hits++;
  }
  return hits / 2 ** d.length;
}

test("verdict rules, branch by branch", () => {
  const ci = (lo: number, hi: number): [number, number] => [lo, hi];
  assert.equal(verdictFor({ n_paired: 4, delta: 0.5, ci: ci(0.4, 0.6), band: null }), "insufficient_data");
  assert.equal(verdictFor({ n_paired: 0, delta: null, ci: null, band: null }), "insufficient_data");
  // fewer than 2 runs a side: no band
  assert.equal(verdictFor({ n_paired: 5, delta: 0.1, ci: ci(0.01, 0.2), band: null }), "moved_unreplicated");
  assert.equal(verdictFor({ n_paired: 5, delta: -0.1, ci: ci(-0.2, -0.01), band: null }), "moved_the_wrong_way");
  assert.equal(verdictFor({ n_paired: 5, delta: 0.1, ci: ci(0, 0.2), band: null }), "no_change_detected");
  // with a band
  assert.equal(verdictFor({ n_paired: 50, delta: 0.05, ci: ci(0.01, 0.09), band: 0.06 }), "within_eval_noise");
  assert.equal(verdictFor({ n_paired: 50, delta: -0.05, ci: ci(-0.09, -0.01), band: 0.06 }), "within_eval_noise");
  assert.equal(verdictFor({ n_paired: 50, delta: 0.05, ci: ci(0.01, 0.09), band: 0.04 }), "moved");
  assert.equal(verdictFor({ n_paired: 50, delta: -0.05, ci: ci(-0.09, -0.01), band: 0.04 }), "moved_the_wrong_way");
  assert.equal(verdictFor({ n_paired: 50, delta: 0.05, ci: ci(-0.01, 0.11), band: 0.04 }), "no_change_detected");
});

test("noise band: pooled run SD of per-run pass@1 times the t quantile", () => {
  const band = noiseBand([0.5, 0.6], [0.7, 0.9]);
  assert.ok(band);
  assert.equal(band.df, 2);
  close(band.run_sd, Math.sqrt((0.005 + 0.02) / 2));
  close(band.q, 4.302652729749464, 1e-9);
  close(band.band, 4.302652729749464 * Math.sqrt(0.0125) * Math.sqrt(1 / 2 + 1 / 2), 1e-9);
  const three = noiseBand([0.5, 0.52, 0.54], [0.6, 0.6, 0.63]);
  assert.ok(three);
  assert.equal(three.df, 4);
  close(three.q, 2.7764451051977987, 1e-9);
  assert.equal(noiseBand([0.5], [0.6, 0.7]), null);
});

test("sign-flip p-value is exact for small n and agrees with Monte Carlo for large n", () => {
  assert.equal(signFlipTest([1, 1, 1, 1, 1]).p, 2 / 32);
  assert.equal(signFlipTest([0, 0, 0]).p, 1);
  const d = [0.25, -0.5, 0.75, 1, 0.25, 0, 0.5, -0.25, 0.5, 0.75, 0.25, 1];
  const exact = signFlipTest(d);
  assert.ok(exact.exact);
  close(exact.p, brutePValue(d));
  const mc = signFlipTest(d, { exactMax: 0, permutations: 20000, seed: 1 });
  assert.ok(!mc.exact);
  assert.ok(Math.abs(mc.p - exact.p) < 0.01, `${mc.p} vs ${exact.p}`);
  assert.deepEqual(signFlipTest(d, { exactMax: 0, seed: 1 }), signFlipTest(d, { exactMax: 0, seed: 1 }));
});

test("power: detectable effect and tasks needed from the SD of the paired differences", () => {
  close(powerMultiplier(), 1.959963984540054 + 0.8416212335729143, 1e-12);
  close(detectableEffect(0.3, 100), (2.801585218 * 0.3) / 10, 1e-9);
  assert.equal(tasksNeeded(0.3, 0.05), Math.ceil(((2.801585218 * 0.3) / 0.05) ** 2)); // 283
  assert.equal(tasksNeeded(0.3, -0.05), 283);
  assert.equal(tasksNeeded(0.3, 0), null);
  assert.equal(detectableEffect(null, 1), null);
});

test("paired delta on a hand-made pair of files", () => {
  // pooled pass rates a -> b: t1 .5->1, t2 0->.25, t3 .75->.75, t4 1->.5, t5 .25->.75, t6 .5->1 (only in a: t7)
  const a = [...countRows("t1", 4, 2), ...countRows("t2", 4, 0), ...countRows("t3", 4, 3), ...countRows("t4", 4, 4), ...countRows("t5", 4, 1), ...countRows("t6", 2, 1), ...countRows("t7", 4, 4)];
  const b = [...countRows("t1", 4, 4), ...countRows("t2", 4, 1), ...countRows("t3", 4, 3), ...countRows("t4", 4, 2), ...countRows("t5", 4, 3), ...countRows("t6", 4, 4), ...countRows("t8", 4, 0)];
  const diffs = [0.5, 0.25, 0, -0.5, 0.5, 0.5];
  const r = pairedDelta(a, b, { seed: 0 });
  assert.equal(r.n_paired, 6);
  close(r.delta, 1.25 / 6);
  assert.deepEqual(r.ci, bootstrapCI(diffs, { seed: 0 }));
  close(r.p, brutePValue(diffs));
  assert.equal(r.runs_a, 1);
  assert.equal(r.runs_b, 1);
  assert.equal(r.run_deltas.length, 1);
  close(r.run_deltas[0], 1.25 / 6);
  const sd = Math.sqrt(diffs.reduce((s, x) => s + (x - 1.25 / 6) ** 2, 0) / 5);
  close(r.detectable_effect, (powerMultiplier() * sd) / Math.sqrt(6));
  assert.equal(r.tasks_needed, Math.ceil(((powerMultiplier() * sd) / (1.25 / 6)) ** 2));
  assert.ok(r.ci && r.ci[0] < 0 && r.ci[1] > 0); // one task lost ground: the interval straddles 0
  assert.equal(r.verdict, "no_change_detected");
  assert.deepEqual(Object.keys(r), ["n_paired", "delta", "ci", "p", "verdict", "runs_a", "runs_b", "run_deltas", "detectable_effect", "tasks_needed", "markers", "duplicates_dropped", "by"]);
});

test("fewer than 5 paired tasks is insufficient_data, whatever the numbers", () => {
  const a = ["x", "y", "z", "w"].flatMap((t) => countRows(t, 4, 0));
  const b = ["x", "y", "z", "w", "v"].flatMap((t) => countRows(t, 4, 4));
  const r = pairedDelta(a, b);
  assert.equal(r.n_paired, 4);
  assert.equal(r.delta, 1);
  assert.equal(r.verdict, "insufficient_data");
});

test("one run a side: a clear gain is moved_unreplicated, a clear loss moved_the_wrong_way", () => {
  const rates = Array.from({ length: 40 }, (_, i) => 0.2 + (i % 5) * 0.1);
  const a = simulateRows({ rates, samples: 4, seed: 1 });
  const b = simulateRows({ rates: rates.map((p) => p + 0.35), samples: 4, seed: 2 });
  assert.equal(pairedDelta(a, b).verdict, "moved_unreplicated");
  assert.equal(pairedDelta(b, a).verdict, "moved_the_wrong_way");
  assert.equal(pairedDelta(a, a).verdict, "no_change_detected");
});

test("three runs a side: moved with the gain replicated in every run, or within_eval_noise when runs disagree", () => {
  const rates = Array.from({ length: 40 }, (_, i) => 0.2 + (i % 5) * 0.1);
  const a = simulateRows({ rates, samples: 4, runs: 3, seed: 1 });
  const b = simulateRows({ rates: rates.map((p) => p + 0.35), samples: 4, runs: 3, seed: 2 });
  const d = compareRows(a, b);
  assert.equal(d.stats.runs_a, 3);
  assert.equal(d.stats.verdict, "moved");
  assert.equal(d.stats.run_deltas.length, 3);
  assert.ok(d.stats.run_deltas.every((x) => x !== null && x > 0));
  assert.ok(d.noise && Math.abs(d.stats.delta as number) >= d.noise.band);

  // runs of each side swing between all right and all wrong; the small mean gain is inside the noise
  const ids = Array.from({ length: 10 }, (_, i) => `q${i}`);
  const swingA = [...ids.flatMap((t) => runRows(t, "0", 4, 4)), ...ids.flatMap((t) => runRows(t, "1", 4, 0))];
  const swingB = [...ids.flatMap((t) => runRows(t, "0", 4, 4)), ...ids.flatMap((t, i) => runRows(t, "1", 4, i < 5 ? 1 : 0))];
  const s = compareRows(swingA, swingB);
  assert.deepEqual(s.run_pass1_a, [1, 0]);
  assert.ok(s.noise && s.noise.band > 0.5);
  close(s.stats.delta, 0.0625);
  assert.equal(s.stats.verdict, "within_eval_noise");
  assert.deepEqual(s.stats.run_deltas, [0, 0.125]);
});

test("runs pair by sorted eval_run id, numerically when the ids are numbers", () => {
  const ids = ["t1", "t2", "t3", "t4", "t5"];
  const a = [...ids.flatMap((t) => runRows(t, "10", 2, 0)), ...ids.flatMap((t) => runRows(t, "2", 2, 2))];
  const b = [...ids.flatMap((t) => runRows(t, "r-b", 2, 2)), ...ids.flatMap((t) => runRows(t, "r-a", 2, 1))];
  const d = compareRows(a, b);
  assert.deepEqual(d.run_ids_a, ["2", "10"]);
  assert.deepEqual(d.run_ids_b, ["r-a", "r-b"]);
  assert.deepEqual(d.stats.run_deltas, [0.5 - 1, 1 - 0]);
});

test("markers: boolean fields present in both files get the same paired comparison", () => {
  const rates = Array.from({ length: 30 }, (_, i) => (i % 3) / 3);
  const a = simulateRows({ rates, samples: 4, seed: 3, sampleFields: (c, r) => ({ executes: c || r() < 0.3, has_sql: 1, only_a: true, style: "x" }) });
  const b = simulateRows({ rates, samples: 4, seed: 4, sampleFields: (c, r) => ({ executes: c || r() < 0.9, has_sql: 1 }) });
  assert.deepEqual(detectMarkers(a, b), ["executes", "has_sql"]);
  const r = pairedDelta(a, b);
  const ex = r.markers.executes;
  assert.equal(ex.n_paired, 30);
  const pairs = pairTasks(a, b, "executes");
  close(ex.delta, pairs.reduce((s, t) => s + t.diff, 0) / 30);
  assert.ok((ex.delta as number) > 0.2 && ex.ci !== null && ex.ci[0] > 0);
  assert.equal(r.markers.has_sql.delta, 0);
  assert.equal(r.markers.has_sql.p, 1);
});

test("per-group deltas, and row order does not change anything", () => {
  const rates = Array.from({ length: 30 }, (_, i) => 0.1 + (i % 4) * 0.2);
  const fields = (i: number) => ({ difficulty: ["easy", "medium", "hard"][i % 3] });
  const a = simulateRows({ rates, samples: 3, runs: 2, seed: 5, fields });
  const b = simulateRows({ rates: rates.map((p) => Math.min(1, p + 0.2)), samples: 3, runs: 2, seed: 6, fields });
  const r = pairedDelta(a, b, { by: ["difficulty"], B: 300 });
  assert.deepEqual(Object.keys(r.by.difficulty), ["easy", "hard", "medium"]);
  assert.equal(r.by.difficulty.easy.n_paired, 10);
  const easyOnly = pairedDelta(a.filter((x) => x.difficulty === "easy"), b.filter((x) => x.difficulty === "easy"), { B: 300 });
  const { by: _by, ...easyStats } = easyOnly;
  assert.deepEqual(r.by.difficulty.easy, easyStats);
  const again = pairedDelta(shuffled(a, 1), shuffled(b, 2), { by: ["difficulty"], B: 300 });
  assert.equal(JSON.stringify(again), JSON.stringify(r));
});
