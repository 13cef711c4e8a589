import { test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { configChanges, validateConfig } from "../../lib/train/config.js";
import { SETTINGS, defaultOf, settingsMarkdown, type Setting, type TrainMode } from "../../lib/train/settings.js";
import { kitRoot } from "../../lib/core/paths.js";

test("docs/training.md's settings table is the settings table", () => {
  const lines = readFileSync(join(kitRoot(), "docs", "training.md"), "utf8").split("\n");
  const start = lines.indexOf("| field | type | default | meaning |");
  assert.ok(start >= 0, "docs/training.md has no settings table");
  let end = start;
  while (end < lines.length && lines[end].startsWith("|")) end++;
  assert.deepEqual(lines.slice(start, end), settingsMarkdown(), "regenerate the table from settingsMarkdown() (lib/train/settings.ts)");
});

test("a config that sets nothing optional gets every default of the table, nested ones included", () => {
  const required = { model: "m", tasks: "t.jsonl", output_dir: "out", steps: 3 };
  for (const mode of ["sft", "grpo"] as TrainMode[]) {
    const cfg = validateConfig({ ...required, ...(mode === "grpo" ? { eval: { every: 2 } } : {}), band: { rows: "r.jsonl" } }, mode, "/cfg/c.json") as unknown as Record<string, unknown>;
    assert.deepEqual(Object.keys(cfg), (SETTINGS as readonly Setting[]).map((s) => s.name), `${mode}: the config's fields are the table's, in its order`);
    for (const s of SETTINGS as readonly Setting[]) {
      if (s.name in required || s.name === "mode") continue;
      if (s.type.kind === "object") {
        const got = cfg[s.name] as Record<string, unknown> | null;
        if (got === null) continue; // sft: eval is off
        assert.deepEqual(Object.keys(got), s.type.fields.map((f) => f.name), `${mode}: ${s.name}'s fields`);
        for (const f of s.type.fields) {
          const d = defaultOf(`${s.name}.${f.name}`, mode, got);
          if (d !== undefined && f.type.kind !== "path") assert.deepEqual(got[f.name], d, `${mode}: ${s.name}.${f.name}`);
        }
      } else assert.deepEqual(cfg[s.name], defaultOf(s.name, mode, cfg), `${mode}: ${s.name}`);
    }
  }
});

test("computed defaults follow the fields they depend on", () => {
  const base = { model: "m", tasks: "t", output_dir: "o", steps: 1 };
  assert.equal(validateConfig({ ...base, adapter: { r: 16 } }, "grpo").adapter?.alpha, 16);
  assert.equal(validateConfig({ ...base, loss_type: "cispo" }, "grpo").epsilon_high, 5);
  assert.equal(validateConfig(base, "sft").lr, 1e-5);
  assert.equal(validateConfig(base, "grpo").lr, 1e-6);
  assert.equal(validateConfig({ ...base, episode: { tool_rows: 7 } }, "grpo").episode.tool_rows, 7);
  assert.throws(() => validateConfig({ ...base, steps: 0 }, "grpo"), /'steps' must be an integer >= 1/);
});

test("a resumed run whose config.json predates a setting sees that setting at its default as no change", () => {
  const base = { model: "m", tasks: "t", output_dir: "o", steps: 1 };
  const old = JSON.parse(JSON.stringify(validateConfig(base, "grpo")));
  delete old.episode.tool_rows;
  assert.deepEqual(configChanges(old, validateConfig(base, "grpo")), []);
  assert.deepEqual(configChanges(old, validateConfig({ ...base, episode: { tool_rows: 7 } }, "grpo")), ["episode.tool_rows: (absent) -> 7"]);
});

test("sampling.prefix_caching defaults to true, and a resume may turn it off or on (the samples do not change)", () => {
  const base = { model: "m", tasks: "t", output_dir: "o", steps: 1 };
  const on = validateConfig(base, "grpo");
  assert.equal(on.sampling.prefix_caching, true);
  const off = validateConfig({ ...base, sampling: { prefix_caching: false } }, "grpo");
  assert.equal(off.sampling.prefix_caching, false);
  assert.deepEqual(configChanges(JSON.parse(JSON.stringify(on)), off), []);
  assert.deepEqual(configChanges(JSON.parse(JSON.stringify(on)), validateConfig({ ...base, sampling: { prefix_caching: false, max_tokens: 9 } }, "grpo")), ["sampling.max_tokens: 512 -> 9"]);
  assert.throws(() => validateConfig({ ...base, sampling: { prefix_caching: "no" } }, "grpo"), /sampling\.prefix_caching/);
});

test("logit_chunk_tokens lays out the same math in memory: a resumed run may change it", () => {
  const base = { model: "m", tasks: "t", output_dir: "o", steps: 1 };
  const old = JSON.parse(JSON.stringify(validateConfig(base, "grpo")));
  assert.equal(old.logit_chunk_tokens, 1024);
  assert.deepEqual(configChanges(old, validateConfig({ ...base, logit_chunk_tokens: 0 }, "grpo")), []);
  assert.deepEqual(configChanges(old, validateConfig({ ...base, micro_batch_rows: 8 }, "grpo")), ["micro_batch_rows: 0 -> 8"]);
});
