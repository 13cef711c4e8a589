import { test } from "node:test";
import assert from "node:assert/strict";
import { SQL_TOOL_NAME } from "../../lib/episode/tools.js";
import { exportRecord } from "../../lib/tasks/export.js";
import type { Task } from "../../lib/tasks/types.js";
import type { ChatMessage } from "../../lib/core/messages.js";

const task: Task = { id: "t1", db_id: "shop", db_path: "/data/shop.sqlite", question: "How many?", gold_sql: "SELECT 1", difficulty: "easy", archetype: "count", style: "terse", split: "train", source: "test" };
const messages: ChatMessage[] = [{ role: "user", content: "How many?" }];

test("the trl export carries the columns integrations/python trl_reward reads", () => {
  const r = exportRecord(task, "trl", messages, 0) as Record<string, unknown>;
  assert.equal(r.task_id, "t1");
  assert.equal(r.db_path, "/data/shop.sqlite");
  assert.equal(r.solution, "SELECT 1");
  assert.deepEqual(r.prompt, messages);
});

test("the verl export carries gold, db and task id, and the create_kwargs verl hands the SQL tool", () => {
  const r = exportRecord(task, "verl", messages, 4) as { reward_model: { ground_truth: string }; extra_info: Record<string, any> };
  assert.equal(r.reward_model.ground_truth, "SELECT 1");
  assert.equal(r.extra_info.task_id, "t1");
  assert.equal(r.extra_info.db_path, "/data/shop.sqlite");
  assert.equal(r.extra_info.index, 4);
  assert.equal(r.extra_info.need_tools_kwargs, true);
  assert.deepEqual(Object.keys(r.extra_info.tools_kwargs), [SQL_TOOL_NAME]);
  assert.deepEqual(r.extra_info.tools_kwargs[SQL_TOOL_NAME].create_kwargs, { task_id: "t1", db_path: "/data/shop.sqlite" });
});
