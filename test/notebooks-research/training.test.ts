/**
 * Notebooks 03 and 04 on the tiny Qwen2 test model (wasm backend): a two-step GRPO round with live
 * curves and a holdout checkpoint, then `t2s serve` with the adapter it wrote, scoring training prompts
 * through HTTP with PASS/FAIL checks.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { cpSync, readFileSync, writeFileSync, existsSync } from "node:fs";
import { join, resolve } from "node:path";
import Database from "better-sqlite3";
import { runCli, scratchDir } from "../helpers.js";

function world(): { dir: string; config: string } {
  const dir = scratchDir("t2s-nb-train-");
  cpSync(resolve("test/fixtures/model/qwen2"), join(dir, "model"), { recursive: true });
  const cfgPath = join(dir, "model", "config.json");
  const mc = JSON.parse(readFileSync(cfgPath, "utf8"));
  mc.max_position_embeddings = 4096;
  writeFileSync(cfgPath, JSON.stringify(mc));
  const db = new Database(join(dir, "tiny.sqlite"));
  db.exec("CREATE TABLE pet (id INTEGER PRIMARY KEY, name TEXT); INSERT INTO pet VALUES (1, 'ada'), (2, 'bo'), (3, 'cy');");
  db.close();
  const task = (id: string, q: string, sql: string) => ({ id, db_id: "tiny", db_path: "tiny.sqlite", question: q, gold_sql: sql, difficulty: "easy", archetype: "count", style: "terse", split: "train", source: "test" });
  writeFileSync(join(dir, "tasks.jsonl"), [task("t1", "How many pets?", "SELECT COUNT(*) FROM pet"), task("t2", "Name of pet 2?", "SELECT name FROM pet WHERE id = 2")].map((t) => JSON.stringify(t)).join("\n") + "\n");
  const config = join(dir, "grpo.json");
  writeFileSync(config, JSON.stringify({
    model: "model", tasks: "tasks.jsonl", output_dir: "out", seed: 1, steps: 2, prompts_per_step: 1, group_size: 2, lr: 0.001, checkpoint_every: 1,
    adapter: { r: 2, alpha: 4 }, sampling: { max_tokens: 6 }, eval: { every: 2, split: "train", limit: 1 },
  }));
  return { dir, config };
}

test("notebooks 03 and 04: a GRPO round, then the served adapter checked through HTTP", async () => {
  const w = world();
  const report = join(w.dir, "report");
  const params: Record<string, string> = {
    config: w.config, backend: "wasm", refresh_ms: "500", report_dir: report,
    model: join(w.dir, "model"), adapter: join(w.dir, "out", "adapter"), train_log: join(w.dir, "out", "train_log.jsonl"),
    tasks: join(w.dir, "tasks.jsonl"), limit: "1", max_tokens: "6", out_dir: join(w.dir, "served"),
  };
  const args = ["notebooks", "run", "03-grpo-round", "04-serving-check", "--out", report, "--json", "--timeout-ms", "120000"];
  for (const [k, v] of Object.entries(params)) args.push("--param", `${k}=${v}`);
  const r = await runCli(args, { timeoutMs: 170_000, env: { T2S_BACKEND: "wasm" } });
  assert.equal(r.code, 0, r.stdout + r.stderr);
  const results = JSON.parse(r.stdout) as Array<{ name: string; ok: boolean }>;
  assert.deepEqual(results.map((x) => x.ok), [true, true]);

  const nb03 = readFileSync(join(report, "03-grpo-round.html"), "utf8");
  for (const name of ["03-training-curves", "training-curves-live"]) assert.ok(nb03.includes(`data-t2s-figure="${name}"`), name);
  assert.ok(nb03.includes('data-t2s-table="03-holdout-checkpoints"'));
  assert.match(nb03, /step 2\/2 \| reward_mean/);
  assert.ok(existsSync(join(report, "figures", "03-training-curves.json")));

  const nb04 = readFileSync(join(report, "04-serving-check.html"), "utf8");
  assert.match(nb04, /served at http:\/\/127\.0\.0\.1:\d+\/v1/);
  for (const check of ["served score matches the trainer&#39;s log|served score matches the trainer's log", "adapter is not a no-op", "every graded row used the intended turn"]) {
    assert.match(nb04, new RegExp(`(PASS|FAIL)</strong> (${check})`));
  }
  assert.ok(nb04.includes('data-t2s-table="04-serving-checks"'));
  assert.ok(nb04.includes('data-t2s-table="04-served-headline"'));
});
