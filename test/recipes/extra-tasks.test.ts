import { test } from "node:test";
import assert from "node:assert/strict";
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { defaultRecipe, runRecipe, sftConfig, type RecipeOptions } from "../../lib/recipes/default-model.js";
import { readTasks, writeTasks } from "../../lib/tasks/io.js";
import type { Task } from "../../lib/tasks/types.js";
import { runCli, scratchDir } from "../helpers.js";
import { miniTasks } from "./fixture.js";

function tinyInit(tasks: string, work: string, extra?: string): RecipeOptions {
  const o = defaultRecipe(tasks, work);
  o.vocabSize = 320;
  o.shape = { hiddenSize: 16, numLayers: 1, numHeads: 2, numKvHeads: 1, intermediateSize: 24, maxPositions: 512 };
  o.initOnly = true;
  o.extraTasks = extra;
  return o;
}

function extraFile(dir: string, name: string, tasks: Task[]): string {
  const file = join(dir, name);
  writeTasks(file, tasks);
  return file;
}

test("--extra-tasks: sft-tasks.jsonl is train split + extras, SFT reads it, the tokenizer is unchanged", async () => {
  const dir = scratchDir("t2s-extra-");
  const tasksFile = miniTasks(dir);
  const base = readTasks(tasksFile);
  const db = base[0].db_path;
  const extra: Task[] = [
    { id: "x1", db_id: "mini", db_path: db, question: "How many pets are older than 2?", gold_sql: "SELECT COUNT(*) FROM pets WHERE age > 2", difficulty: "easy", archetype: "lookup", style: "terse", split: "train", source: "extra" },
    { id: "x2", db_id: "mini", db_path: db, question: "Name the oldest pet.", gold_sql: "SELECT name FROM pets ORDER BY age DESC LIMIT 1", difficulty: "easy", archetype: "lookup", style: "terse", split: "train", source: "extra" },
  ];
  const with_ = tinyInit(tasksFile, join(dir, "with"), extraFile(dir, "extra.jsonl", extra));
  const without = tinyInit(tasksFile, join(dir, "without"));
  await runRecipe(with_);
  await runRecipe(without);
  const sft = readTasks(join(with_.work, "sft-tasks.jsonl"));
  assert.deepEqual(sft.map((t) => t.id), [...base.filter((t) => t.split === "train").map((t) => t.id), "x1", "x2"]);
  assert.ok(sft.every((t) => t.split === "train" && t.db_path === db));
  assert.equal(sftConfig(with_).tasks, join(with_.work, "sft-tasks.jsonl"));
  assert.equal(sftConfig(with_).split, "train");
  assert.equal(sftConfig(without).tasks, tasksFile);
  assert.ok(!existsSync(join(without.work, "sft-tasks.jsonl")));
  assert.ok(readFileSync(join(with_.work, "init", "tokenizer.json")).equals(readFileSync(join(without.work, "init", "tokenizer.json"))));
});

test("--extra-tasks with a holdout task, a holdout gold query or a holdout split is refused, naming the task", async () => {
  const dir = scratchDir("t2s-extra-bad-");
  const tasksFile = miniTasks(dir);
  const base = readTasks(tasksFile);
  const held = base.find((t) => t.split === "holdout") as Task;
  const ok: Task = { ...base.find((t) => t.split === "train")!, id: "fresh", question: "How many pets are there?", gold_sql: "SELECT COUNT(*) FROM pets" };
  const cases: [string, Task[], RegExp][] = [
    ["copy.jsonl", [ok, { ...held, split: "train" }], new RegExp(`task ${held.id} is a holdout task`)],
    ["sql.jsonl", [{ ...ok, id: "y1", question: "Different words, same query?", gold_sql: held.gold_sql.toLowerCase() + " ;" }], new RegExp(`task y1 has the same gold SQL as holdout task ${held.id}`)],
    ["split.jsonl", [{ ...ok, id: "y2", split: "holdout" }], /task y2 has split "holdout"/],
  ];
  for (const [name, list, re] of cases) {
    const o = tinyInit(tasksFile, join(dir, name + "-work"), extraFile(dir, name, list));
    await assert.rejects(runRecipe(o), re);
    assert.ok(!existsSync(join(o.work, "sft-tasks.jsonl")) && !existsSync(join(o.work, "init")), "nothing written for a refused file");
  }
  const r = await runCli(["recipe", "default-model", "--tasks", tasksFile, "--work", join(dir, "cli"), "--extra-tasks", join(dir, "copy.jsonl"), "--init-only"]);
  assert.notEqual(r.code, 0);
  assert.match(r.stderr, /holdout_leak.*is a holdout task/);
});
