/**
 * The serving check scores the tasks the trainer trained on (or a stated seeded sample of them), not the
 * first tasks of the split: a served score on other prompts differs from the trainer's for that alone.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import Database from "better-sqlite3";
import { runCli, scratchDir } from "../helpers.js";
import { startFakeOpenAI } from "../support/fake-openai.js";
import { checkTrainerAgreement, describeServedTasks, servedTasks, trainerTasks } from "../../lib/report/serving.js";
import { servingStep } from "../../lib/report/notebook-steps.js";
import { RUN_TASKS_FILE, sampleTaskIds } from "../../lib/tasks/select.js";
import { toJsonl } from "../../lib/core/jsonl.js";
import { tinyTrainingWorld } from "../train/tiny-world.js";

/** A task file of 12 train tasks on one small database, and a band rows file whose band is t03..t10. */
function world(): { dir: string; tasks: string; band: string; bandIds: string[] } {
  const dir = scratchDir("t2s-serving-tasks-");
  const db = new Database(join(dir, "n.sqlite"));
  db.exec("CREATE TABLE n (x INTEGER); INSERT INTO n VALUES (1), (2), (3);");
  db.close();
  const ids = Array.from({ length: 12 }, (_, i) => `t${String(i + 1).padStart(2, "0")}`);
  const tasks = join(dir, "tasks.jsonl");
  writeFileSync(tasks, toJsonl(ids.map((id, i) => ({ id, db_id: "n", db_path: "n.sqlite", question: `How many rows are above ${i}?`, gold_sql: `SELECT COUNT(*) FROM n WHERE x > ${i % 3}`, difficulty: "easy", archetype: "count", style: "terse", split: "train", source: "test" }))));
  // t01, t02 always right and t11, t12 always wrong: out of the band, as the first tasks of a split often are
  const rows = ids.flatMap((id, i) => [0, 1, 2, 3].map((sample) => ({ task_id: id, sample, correct: i < 2 ? true : i >= 10 ? false : sample < 2 })));
  const band = join(dir, "band.jsonl");
  writeFileSync(band, toJsonl(rows));
  return { dir, tasks, band, bandIds: ids.slice(2, 10) };
}

const log = Array.from({ length: 3 }, (_, step) => ({ step, reward_mean: 0.5 }));

test("the trainer's tasks come from its run folder: train_tasks.json, else its config re-selected", () => {
  const w = world();
  const run = join(w.dir, "run");
  mkdirSync(run);
  assert.equal(trainerTasks(run), null, "a folder with neither (a TRL run) has no known tasks");
  writeFileSync(join(run, "config.json"), JSON.stringify({ mode: "grpo", tasks: w.tasks, split: "train", band: { rows: w.band, lo: 0.1, hi: 0.9 }, limit: null }));
  const fromConfig = trainerTasks(run)!;
  assert.deepEqual(fromConfig.ids, w.bandIds);
  assert.equal(fromConfig.source, join(run, "config.json"));
  writeFileSync(join(run, RUN_TASKS_FILE), JSON.stringify({ tasks: w.tasks, split: "train", band: null, limit: null, count: 2, task_ids: ["t05", "t04"] }));
  assert.deepEqual(trainerTasks(run)!.ids, ["t04", "t05"], "what the run recorded wins");
});

test("a seeded sample of the trainer's tasks: same seed, same sample; 0 or more than there are is all of them", () => {
  const ids = Array.from({ length: 255 }, (_, i) => `task-${i}`);
  const a = sampleTaskIds(ids, 128, 0);
  assert.equal(a.ids.length, 128);
  assert.deepEqual(a.sample, { size: 128, seed: 0 });
  assert.deepEqual(sampleTaskIds(ids, 128, 0).ids, a.ids);
  assert.notDeepEqual(sampleTaskIds(ids, 128, 1).ids, a.ids);
  assert.notDeepEqual(a.ids, [...ids].sort().slice(0, 128), "not the first 128");
  assert.equal(sampleTaskIds(ids, 0, 0).sample, null);
  assert.equal(sampleTaskIds(ids, 300, 0).ids.length, 255);
  const trainer = { ids: [...ids].sort(), tasksFile: "tasks.jsonl", source: "run/train_tasks.json" };
  assert.equal(describeServedTasks(servedTasks(trainer, 128, 7)), "a seeded sample of 128 of the 255 tasks the trainer trained on (seed 7); from run/train_tasks.json");
  assert.equal(describeServedTasks(servedTasks(trainer, 0, 7)), "all 255 tasks the trainer trained on; from run/train_tasks.json");
});

test("the serving step scores the trainer's tasks; rows on the first tasks of the split fail the check, naming the coverage", async () => {
  const w = world();
  const run = join(w.dir, "run");
  mkdirSync(run);
  writeFileSync(join(run, "config.json"), JSON.stringify({ tasks: w.tasks, split: "train", band: { rows: w.band, lo: 0.1, hi: 0.9 }, limit: null }));
  const server = await startFakeOpenAI(() => ({ content: "```sql\nSELECT COUNT(*) FROM n\n```" }));
  try {
    const scored = servedTasks(trainerTasks(run)!, 4, 0);
    const step = await servingStep({ model: "/unused", adapter: "/unused", endpoint: `${server.url}/v1`, servedAdapter: "a", servedBase: "", tasks: scored.tasksFile, taskIds: scored.ids, k: 1, outDir: join(w.dir, "served") });
    assert.deepEqual([...new Set(step.adapterRows.map((r) => r.task_id))].sort(), scored.ids);
    assert.ok(scored.ids.every((id) => w.bandIds.includes(id)));
    const ok = checkTrainerAgreement(step.adapterRows, log, { tasks: scored, tolerance: 1 });
    assert.equal(ok.status, "PASS", ok.reason);
    assert.match(ok.reason, /on a seeded sample of 4 of the 8 tasks the trainer trained on \(seed 0\)/);

    // the old selection: the first 4 train tasks of the file, whatever the trainer saw
    const first = await servingStep({ model: "/unused", adapter: "/unused", endpoint: `${server.url}/v1`, servedAdapter: "a", servedBase: "", tasks: w.tasks, split: "train", limit: 4, k: 1, outDir: join(w.dir, "served-first") });
    const bad = checkTrainerAgreement(first.adapterRows, log, { tasks: scored, tolerance: 1 });
    assert.equal(bad.status, "FAIL");
    assert.match(bad.reason, /the served rows cover \d of the 4 tasks to score \(a seeded sample of 4 of the 8 tasks the trainer trained on \(seed 0\)/);
    assert.match(bad.reason, /other tasks \(e\.g\. t01, t02/);
    const unknown = checkTrainerAgreement(first.adapterRows, log, { tolerance: 1 });
    assert.match(unknown.reason, /its tasks are unknown/);
  } finally {
    await server.close();
  }
});

test("a training run records the tasks it trains on in train_tasks.json", async () => {
  const dir = tinyTrainingWorld("t2s-run-tasks-");
  const config = join(dir, "sft.json");
  writeFileSync(config, JSON.stringify({ model: "model", tasks: "tasks.jsonl", output_dir: "out", seed: 1, batch_size: 1, epochs: 1, lr: 0.01, limit: 1, adapter: { r: 2, targets: ["q_proj"] } }));
  const r = await runCli(["train", "sft", "--config", config, "--json"], { env: { T2S_BACKEND: "wasm" } });
  assert.equal(r.code, 0, r.stderr);
  const recorded = JSON.parse(readFileSync(join(dir, "out", RUN_TASKS_FILE), "utf8"));
  assert.deepEqual(recorded.task_ids, ["t1"]);
  assert.equal(recorded.limit, 1);
  assert.deepEqual(trainerTasks(join(dir, "out"))!.ids, ["t1"]);
});
