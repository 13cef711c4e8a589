import { test } from "node:test";
import assert from "node:assert/strict";
import { cpSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { runCli, scratchDir } from "../helpers.js";
import { fixtureDir } from "./fixtures.js";
import { readSafetensors, writeSafetensors } from "../../lib/model/safetensors.js";
import { loadModel } from "../../lib/model/load.js";

/** A copy of the llama fixture with one weight set to `value`. */
function corrupted(value: number): string {
  const dir = join(scratchDir("t2s-badw-"), "model");
  cpSync(fixtureDir("llama"), dir, { recursive: true });
  const name = "model.layers.0.mlp.up_proj.weight";
  const file = join(dir, JSON.parse(readFileSync(join(dir, "model.safetensors.index.json"), "utf8")).weight_map[name]);
  const tensors = readSafetensors(file);
  tensors.get(name)!.data[3] = value;
  writeSafetensors(file, tensors);
  return dir;
}

test("weights with a NaN or an infinity fail to load with bad_weights naming the tensor", async () => {
  for (const v of [NaN, Infinity, -Infinity]) {
    const dir = corrupted(v);
    await assert.rejects(loadModel(dir, { backend: "cpu" }), (e: Error & { code?: string }) => {
      assert.equal(e.code, "bad_weights");
      assert.match(e.message, new RegExp(`tensor model\\.layers\\.0\\.mlp\\.up_proj\\.weight holds 1 non-finite value\\(s\\) \\(the first, ${String(v).replace("-", "\\-")}, at flat index 3 `));
      return true;
    });
  }
});

test("logits, generate and benchmark refuse a model with NaN weights: one error line, exit 1", async () => {
  const dir = corrupted(NaN);
  const cases = [
    ["logits", "--model", dir, "--ids", "1,2", "--backend", "cpu"],
    ["generate", "--model", dir, "--prompt", "hi", "--max-tokens", "2", "--backend", "cpu"],
    ["benchmark", "--policy", `tfjs:${dir}`, "--tasks", "data/shop/tasks.jsonl", "--limit", "1", "--k", "1", "--out", join(dir, "..", "rows.jsonl"), "--quiet"],
  ];
  for (const args of cases) {
    const r = await runCli(args, { env: { T2S_BACKEND: "cpu" } });
    assert.equal(r.code, 1, `${args[0]}: ${r.stderr}`);
    assert.match(r.stderr, /^error \[bad_weights\]: .*tensor model\.layers\.0\.mlp\.up_proj\.weight holds 1 non-finite/m, args[0]);
    assert.doesNotMatch(r.stderr, /\n\s+at /, "no stack trace");
  }
});
