import { test } from "node:test";
import assert from "node:assert/strict";
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { checkpointSteps, defaultRecipe, exportModel, runRecipe, sftConfig } from "../../lib/recipes/default-model.js";
import { readSafetensorsHeader } from "../../lib/model/safetensors.js";
import { loadModel } from "../../lib/model/load.js";
import { runCli, scratchDir } from "../helpers.js";
import { miniTasks } from "./fixture.js";

function tinyRecipe(dir: string) {
  const o = defaultRecipe(miniTasks(dir), join(dir, "work"));
  o.vocabSize = 320;
  o.shape = { hiddenSize: 16, numLayers: 1, numHeads: 2, numKvHeads: 1, intermediateSize: 24, maxPositions: 512 };
  o.sft = { ...o.sft, steps: 4, batch_size: 2, warmup_steps: 0, checkpoint_every: 1 };
  o.stopAt = 2;
  o.backend = "cpu";
  return o;
}

test("the recipe's SFT config is single-turn, full weights, train split, seeded", () => {
  const c = sftConfig(defaultRecipe("tasks.jsonl", "w"));
  assert.equal(c.full_weights, true);
  assert.equal(c.split, "train");
  assert.deepEqual(c.episode, { style: "single" });
  assert.equal(c.schedule, "cosine");
  assert.equal(c.seed, 1);
});

test("a tiny run writes tokenizer + init, trains until --stop-at 2 with checkpoints, exports a loadable float16 folder", async () => {
  const dir = scratchDir("t2s-recipe-");
  const o = tinyRecipe(dir);
  const res = await runRecipe(o);
  assert.equal(res.stoppedEarly, true);
  assert.ok(res.parameters > 0);
  assert.deepEqual(checkpointSteps(o.work), [1, 2]);
  const log = readFileSync(join(o.work, "sft", "train_log.jsonl"), "utf8").trim().split("\n").map((l) => JSON.parse(l));
  assert.equal(log.length, 3);
  assert.equal(log[0].total_steps, 4);
  assert.ok(log.every((r) => Number.isFinite(r.loss) && r.loss > 0));
  const out = exportModel(join(o.work, "init"), join(o.work, "sft", "checkpoints", "step-000002", "model.safetensors"), join(dir, "model"));
  for (const f of ["config.json", "tokenizer.json", "tokenizer_config.json", "model.safetensors"]) assert.ok(existsSync(join(out, f)), f);
  const header = readSafetensorsHeader(join(out, "model.safetensors"));
  assert.equal(header["model.embed_tokens.weight"].dtype, "F16");
  const m = await loadModel(out, { backend: "cpu" });
  assert.equal(m.config.vocabSize, 320);
  assert.ok(m.requireTokenizer().hasChatTemplate);
  m.dispose();
  // a run cut short continues with resume (a later device call): steps 3-4 of the same schedule
  await assert.rejects(runRecipe({ ...o, stopAt: undefined }), /already holds checkpoints; pass --resume/);
  const more = await runRecipe({ ...o, stopAt: undefined, resume: true });
  assert.equal(more.stoppedEarly, false);
  assert.deepEqual(checkpointSteps(o.work), [1, 2, 3, 4]);
  assert.equal(more.summary!.resumed_from, 2);
  // same seed, same init bytes
  const again = tinyRecipe(scratchDir("t2s-recipe-"));
  again.initOnly = true;
  await runRecipe(again);
  assert.ok(readFileSync(join(again.work, "init", "model.safetensors")).equals(readFileSync(join(o.work, "init", "model.safetensors"))));
  assert.equal(readFileSync(join(again.work, "init", "tokenizer.json"), "utf8"), readFileSync(join(o.work, "init", "tokenizer.json"), "utf8"));
});

test("t2s recipe default-model --init-only, and export names a missing step", async () => {
  const dir = scratchDir("t2s-recipe-cli-");
  const tasks = miniTasks(dir);
  const r = await runCli(["recipe", "default-model", "--tasks", tasks, "--work", join(dir, "w"), "--vocab", "320", "--hidden", "16", "--layers", "1", "--heads", "2", "--kv-heads", "1", "--intermediate", "24", "--max-positions", "4096", "--init-only", "--json"]);
  assert.equal(r.code, 0, r.stderr);
  const s = JSON.parse(r.stdout);
  // the context length reaches the config and the tokenizer (the default is 2,048)
  assert.equal(JSON.parse(readFileSync(join(dir, "w", "init", "config.json"), "utf8")).max_position_embeddings, 4096);
  assert.equal(JSON.parse(readFileSync(join(dir, "w", "init", "tokenizer_config.json"), "utf8")).model_max_length, 4096);
  assert.ok(s.parameters > 0);
  assert.deepEqual(s.checkpoints, []);
  const e = await runCli(["recipe", "export", "--work", join(dir, "w"), "--step", "5", "--out", join(dir, "m")]);
  assert.equal(e.code, 2);
  assert.match(e.stderr, /no checkpoint for step 5/);
  const h = await runCli(["recipe", "default-model", "--help"]);
  assert.match(h.stdout, /--max-seconds/);
});
