/**
 * `t2s tasks export --style tool` writes what `t2s env serve` renders for the task (/v1/prompt: the messages
 * and the tool schema), with verl's per-row `agent_name: tool_agent` and the tool's create_kwargs; the
 * default single style keeps verl's single-turn loop.
 */
import { test, after } from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { ExecutorPool } from "../../lib/db/pool.js";
import { EnvService } from "../../lib/envserve/service.js";
import { startEnvServer } from "../../lib/envserve/server.js";
import { HANG_GUARD_MS, runCli, scratchDir } from "../helpers.js";
import { call, shopTasks, shopTasksFile } from "./fixture.js";

test("a tool-style export carries the prompt and tool schema /v1/prompt renders, agent_name and create_kwargs", { timeout: HANG_GUARD_MS }, async () => {
  const out = scratchDir("t2s-export-tool-");
  const r = await runCli(["tasks", "export", shopTasksFile, "--to", "all", "--style", "tool", "--max-tool-calls", "4", "--out", out], { timeoutMs: HANG_GUARD_MS });
  assert.equal(r.code, 0, r.stderr);
  const rows = (format: string) => readFileSync(join(out, format, "train.jsonl"), "utf8").trim().split("\n").map((l) => JSON.parse(l));
  const verl = rows("verl");
  const trl = rows("trl");
  const tasks = shopTasks();
  const pool = new ExecutorPool({ workers: 1, startOnDemand: true });
  const service = new EnvService({ executor: pool, tasks, prompt: { style: "tool", protocol: "native", maxToolCalls: 4 } });
  const server = await startEnvServer({ service, port: 0 });
  after(async () => {
    await server.close();
    await pool.close();
  });
  for (const row of [verl[0], verl[7], verl[verl.length - 1]]) {
    const id = row.extra_info.task_id;
    const rendered = await call(server.url, "/v1/prompt", { task_id: id });
    assert.deepEqual(row.prompt, rendered.json.messages, id);
    assert.deepEqual(row.extra_info.tools, rendered.json.tools, id);
    assert.equal(row.agent_name, "tool_agent");
    assert.equal(row.extra_info.episode_style, "tool");
    assert.deepEqual(row.extra_info.tools_kwargs.execute_sql_query.create_kwargs, { task_id: id, db_path: row.extra_info.db_path });
  }
  assert.deepEqual(trl[0].prompt, (await call(server.url, "/v1/prompt", { task_id: trl[0].task_id })).json.messages);

  const single = scratchDir("t2s-export-single-");
  assert.equal((await runCli(["tasks", "export", shopTasksFile, "--to", "verl", "--out", single], { timeoutMs: HANG_GUARD_MS })).code, 0);
  const one = JSON.parse(readFileSync(join(single, "verl", "train.jsonl"), "utf8").split("\n")[0]);
  assert.equal(one.agent_name, undefined, "single style leaves verl's default (single-turn) loop");
  assert.deepEqual(one.prompt, (await call(server.url, "/v1/prompt", { task_id: one.extra_info.task_id, style: "single" })).json.messages);
  const bad = await runCli(["tasks", "export", shopTasksFile, "--to", "verl", "--style", "chat", "--out", single]);
  assert.equal(bad.code, 2);
});
