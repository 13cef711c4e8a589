import { test } from "node:test";
import assert from "node:assert/strict";
import * as F from "../../lib/report/figures.js";
import { trainingCurvesFigure, readTrainLog, trainProgressLine } from "../../lib/report/training.js";
import { analyzeDelta, forestPlotFigure, passShiftFigure, deltaHeadlineTable, groupDeltaTable, markerTable, runDeltaTable, deltaSummaryLines } from "../../lib/report/delta.js";
import { summarize, passAtKCurve } from "../../lib/stats/summary.js";
import { pairedDelta } from "../../lib/stats/delta.js";
import type { StatRow } from "../../lib/stats/rows.js";
import { outcomesIn } from "../../lib/report/rows.js";
import { scratchDir } from "../helpers.js";
import { makeRows, makeTrainLog } from "./fixtures.js";
import { join } from "node:path";
import { writeFileSync } from "node:fs";

const rows = makeRows({ runs: 2 });
const after = makeRows({ runs: 2, lift: 0.25, seed: 9 });
const stat = (r: typeof rows) => r as unknown as StatRow[];
type Trace = Record<string, any>;

test("pass@1 by group: bar heights and whiskers are the summary's numbers", () => {
  const fig = F.pass1ByGroupFigure(rows, "difficulty");
  const s = summarize(stat(rows), { by: ["difficulty"] });
  const t = fig.data[0] as Trace;
  assert.deepEqual(t.x, ["easy", "medium", "hard"]);
  t.x.forEach((g: string, i: number) => {
    const gs = s.by.difficulty[g];
    assert.equal(t.y[i], gs.pass1);
    assert.ok(Math.abs((t.y[i] as number) + t.error_y.array[i] - gs.pass1_ci![1]) < 1e-12);
    assert.ok(Math.abs((t.y[i] as number) - t.error_y.arrayminus[i] - gs.pass1_ci![0]) < 1e-12);
  });
});

test("outcome stack: one trace per outcome, shares sum to 1 per group; heatmap rows too", () => {
  const fig = F.outcomeStackFigure(rows, "difficulty");
  assert.deepEqual(fig.data.map((t) => t.name), outcomesIn(rows));
  assert.equal(fig.layout?.barmode, "stack");
  for (let i = 0; i < 3; i++) assert.ok(Math.abs(fig.data.reduce((a, t) => a + (t as Trace).y[i], 0) - 1) < 1e-9);
  const heat = F.outcomeHeatmapFigure(rows, "archetype").data[0] as Trace;
  assert.equal(heat.type, "heatmap");
  assert.equal(heat.z.length, 4);
  for (const row of heat.z as number[][]) assert.ok(Math.abs(row.reduce((a, b) => a + b, 0) - 1) < 1e-9);
});

test("pass@k curve: k = 1..n overall and per group, matching lib/stats", () => {
  const fig = F.passAtKCurveFigure(rows, "difficulty");
  assert.equal(fig.data.length, 2 * 4);
  const curve = passAtKCurve(stat(rows));
  const overall = fig.data[0] as Trace;
  assert.deepEqual(overall.x, [1, 2, 3, 4, 5, 6, 7, 8]);
  assert.deepEqual(overall.y, curve.map((p) => p.passk));
  assert.deepEqual((fig.data[1] as Trace).y, curve.map((p) => p.powk));
});

test("task-rate histogram counts every task once; headroom = pass@k - pass@1", () => {
  const h = F.taskRateHistogramFigure(rows).data[0] as Trace;
  assert.equal(h.x.length, 24);
  const fig = F.headroomFigure(rows, "difficulty");
  const [p1, pk, hr] = fig.data as Trace[];
  hr.y.forEach((v: number, i: number) => assert.ok(Math.abs(v - (pk.y[i] - p1.y[i])) < 1e-12));
});

test("training curves: six panels from a log, holdout stars, tolerant of a torn last line", () => {
  const dir = scratchDir();
  const path = join(dir, "train_log.jsonl");
  writeFileSync(path, makeTrainLog(6).map((r) => JSON.stringify(r)).join("\n") + '\n{"step": 6, "rew');
  const log = readTrainLog(path);
  assert.equal(log.length, 6);
  const fig = trainingCurvesFigure(log);
  const names = fig.data.map((t) => t.name);
  for (const n of ["reward_mean", "frac_reward_zero_std", "kl", "entropy", "completion_length_mean", "clip_ratio_region", "holdout pass@1"]) assert.ok(names.includes(n), n);
  assert.deepEqual(new Set(fig.data.map((t) => t.yaxis)), new Set(["y", "y2", "y3", "y4", "y5", "y6"]));
  assert.match(trainProgressLine(log, 10), /^step 6\/10 \| reward_mean 0\.550/);
  writeFileSync(path, '{"step":0}\nnot json\n{"step":1}\n');
  assert.throws(() => readTrainLog(path), /train_log\.jsonl:2/);
});

test("delta: tables and forest plot carry pairedDelta's numbers", () => {
  const d = analyzeDelta(rows, after, { labelA: "base", labelB: "tuned" });
  const ref = pairedDelta(stat(rows), stat(after), { by: ["difficulty", "archetype"] });
  const [h] = deltaHeadlineTable(d).objects() as Array<Record<string, unknown>>;
  assert.equal(h.delta, ref.delta);
  assert.equal(h.verdict, ref.verdict);
  assert.equal(groupDeltaTable(d).numRows(), 3 + 4);
  assert.deepEqual(markerTable(d).array("marker"), Object.keys(ref.markers));
  assert.equal(runDeltaTable(d).numRows(), 2);
  const forest = forestPlotFigure(d).data[0] as Trace;
  assert.equal(forest.x.length, 1 + 3 + 4);
  assert.equal(forest.x[0], ref.delta);
  assert.equal((forest.x[0] as number) - forest.error_x.arrayminus[0], ref.ci![0]);
  assert.ok(deltaSummaryLines(d)[0].startsWith("base -> tuned"));
  const shift = passShiftFigure(rows, after, { labelA: "base", labelB: "tuned" });
  assert.deepEqual(shift.data.map((t) => t.name), ["pass@1", "pass@4", "pass^4"]);
  assert.equal((shift.data[0] as Trace).y[0], summarize(stat(rows)).pass1);
});

test("figures are plain JSON", () => {
  const fig = F.pass1ByGroupFigure(rows, "archetype");
  assert.deepEqual(JSON.parse(JSON.stringify(fig)), fig);
});
