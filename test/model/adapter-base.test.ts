// An adapter is checked and loaded by one code path, against the base it records (issue 43, defect 2):
// `t2s adapter check` answers for the kit with the kit's own loader, and an adapter trained on another base
// of the same shape is refused wherever it is loaded (check, logits, benchmark, serve at start-up and at
// runtime, training's init and resume) unless --allow-base-mismatch / allow_base_mismatch says so.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { cpSync, mkdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { isT2sError } from "../../lib/core/errors.js";
import { kitPath } from "../../lib/core/paths.js";
import { checkAdapter } from "../../lib/model/adapter-check.js";
import { BASE_RECORD_KEY, baseDifferences, readBaseRecord, recordInMetadata } from "../../lib/model/base-record.js";
import { loadModel } from "../../lib/model/load.js";
import { attachAdapter, detachAdapter, mergedModel, saveAdapter } from "../../lib/model/lora.js";
import type { CausalLM } from "../../lib/model/model.js";
import { readSafetensors, readSafetensorsMetadata, writeSafetensors } from "../../lib/model/safetensors.js";
import { startServer } from "../../lib/serve/server.js";
import { runCli, scratchDir, t2sBin } from "../helpers.js";
import { tinyTrainingWorld } from "../train/tiny-world.js";
import { copyFixture, fixtureDir } from "./fixtures.js";

const BASE = kitPath("data", "models", "shop-sql-4m");
/** Another base of the same shape: the same config.json, other weights. */
const OTHER = kitPath("data", "models", "shop-sql-4m-tool");
const R1 = kitPath("data", "models", "shop-sql-4m-grpo-r1");

type Tensors = Map<string, { shape: number[]; data: Float32Array }>;

let base: CausalLM;
let other: CausalLM;

before(async () => {
  base = await loadModel(BASE, { backend: "cpu" });
  other = await loadModel(OTHER, { backend: "cpu" });
});

after(() => {
  base.dispose();
  other.dispose();
});

/** A copy of the round-1 adapter (its record kept unless `plain`), with `change` applied to its tensors and config. */
function variant(name: string, change: (t: Tensors, cfg: Record<string, unknown>) => void = () => {}, plain = false): string {
  const dir = join(scratchDir("t2s-adapter-base-"), name);
  mkdirSync(dir, { recursive: true });
  const t: Tensors = new Map([...readSafetensors(join(R1, "adapter_model.safetensors"))].map(([k, v]) => [k, { shape: v.shape, data: v.data }]));
  const cfg = JSON.parse(readFileSync(join(R1, "adapter_config.json"), "utf8"));
  change(t, cfg);
  const record = readSafetensorsMetadata(join(R1, "adapter_model.safetensors"))[BASE_RECORD_KEY];
  writeSafetensors(join(dir, "adapter_model.safetensors"), t, { metadata: plain || !record ? {} : { [BASE_RECORD_KEY]: record } });
  writeFileSync(join(dir, "adapter_config.json"), JSON.stringify(cfg));
  return dir;
}

test("adapter check answers for the kit with the kit's loader: check PASS for the kit exactly when the kit loads it", async () => {
  const cases: [string, string][] = [
    ["as shipped", variant("ok")],
    // PEFT and vLLM place a LoRA on the (tied) head; the kit places LoRA on attention and MLP only
    ["head LoRA", variant("head", (t) => {
      t.set("base_model.model.lm_head.lora_A.weight", { shape: [16, 256], data: new Float32Array(16 * 256).fill(0.01) });
      t.set("base_model.model.lm_head.lora_B.weight", { shape: [4096, 16], data: new Float32Array(4096 * 16).fill(0.01) });
    })],
    ["fan_in_fan_out", variant("fifo", (_t, cfg) => (cfg.fan_in_fan_out = true))],
    ["peft_type LOHA", variant("loha", (_t, cfg) => (cfg.peft_type = "LOHA"))],
  ];
  for (const [what, dir] of cases) {
    let loads = true;
    try {
      attachAdapter(base, dir, { name: "probe" });
      detachAdapter(base, "probe");
    } catch (e) {
      assert.ok(isT2sError(e, "adapter_mismatch") || isT2sError(e, "bad_adapter"), `${what}: ${(e as Error).message}`);
      loads = false;
    }
    const r = checkAdapter(BASE, dir, ["kit"]);
    assert.equal(r.failures.length === 0, loads, `${what}: the check says ${r.failures.length ? "FAIL" : "PASS"} for the kit, the kit ${loads ? "loads" : "refuses"} it: ${r.failures.join("; ")}`);
    assert.equal(r.kit?.ok, loads, what);
  }
  const head = await runCli(["adapter", "check", "--base", BASE, "--adapter", cases[1][1]]);
  assert.equal(head.code, 1);
  assert.match(head.stdout, /^FAIL the kit refuses it .*adapter_model\.safetensors: 2 key\(s\) match no module/m);
  assert.equal((await runCli(["adapter", "check", "--base", BASE, "--adapter", cases[1][1], "--for", "both"])).code, 0, "PEFT and vLLM place it");
});

test("an adapter trained on another base of the same shape: check FAILs, every load refuses it, --allow-base-mismatch lets it through", async () => {
  const dir = variant("recorded", () => {}, true);
  // the kit records the base of an adapter it did not make, once told which it is
  const rec = await runCli(["adapter", "record", "--base", BASE, "--adapter", dir]);
  assert.equal(rec.code, 0, rec.stderr);
  assert.match(rec.stdout, /wrote the record of base 'shop-sql-4m'/);
  assert.deepEqual(recordInMetadata(readSafetensorsMetadata(join(dir, "adapter_model.safetensors"))), readBaseRecord(BASE));

  const same = await runCli(["adapter", "check", "--base", BASE, "--adapter", dir]);
  assert.equal(same.code, 0, same.stdout);
  assert.match(same.stdout, /base record: trained on 'shop-sql-4m', this base/);
  const wrong = await runCli(["adapter", "check", "--base", OTHER, "--adapter", dir, "--json"]);
  assert.equal(wrong.code, 1);
  const j = JSON.parse(wrong.stdout);
  assert.deepEqual(j.baseRecord.differs, ["weight values"], "same config and shapes, other weights");
  assert.match(j.failures.join("\n"), /trained on base 'shop-sql-4m', and this base differs from it in weight values/);
  const allowed = await runCli(["adapter", "check", "--base", OTHER, "--adapter", dir, "--allow-base-mismatch"]);
  assert.equal(allowed.code, 0, allowed.stdout);
  assert.match(allowed.stdout, /^WARN trained on base 'shop-sql-4m'.*allowed by --allow-base-mismatch/m);

  // the library loads
  assert.throws(() => attachAdapter(other, dir, { name: "x" }), (e) => isT2sError(e, "adapter_base_mismatch") && /--allow-base-mismatch/.test(e.message));
  assert.equal(other.adapters.size, 0);
  attachAdapter(other, dir, { name: "x", allowBaseMismatch: true });
  detachAdapter(other, "x");
  await assert.rejects(mergedModel(other, dir), (e) => isT2sError(e, "adapter_base_mismatch"));
  (await mergedModel(other, dir, { allowBaseMismatch: true })).dispose();
  attachAdapter(base, dir, { name: "x" });
  detachAdapter(base, "x");
  // without a record (PEFT's, an older kit's) it loads on either base, on the shape checks
  const plain = variant("plain", () => {}, true);
  attachAdapter(other, plain, { name: "p" });
  detachAdapter(other, "p");

  // serve: at start-up and at runtime
  await assert.rejects(startServer({ model: other, adapters: { sql: dir }, port: 0 }), (e) => isT2sError(e, "adapter_base_mismatch"));
  const served = await startServer({ model: other, adapters: { sql: dir }, port: 0, adapterLoading: { allowBaseMismatch: true } });
  await served.close();
  const runtime = await startServer({ model: other, port: 0, allowRuntimeLora: true });
  try {
    const r = await fetch(`${runtime.url}/v1/load_lora_adapter`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ lora_name: "sql", lora_path: dir }) });
    assert.equal(r.status, 400);
    const body = (await r.json()) as { error: { code: string; message: string } };
    assert.equal(body.error.code, "adapter_base_mismatch");
  } finally {
    await runtime.close();
  }

  // the command line: serve, logits and benchmark
  const serveArgs = ["serve", "--model", OTHER, "--adapter", `sql=${dir}`, "--port", "0", "--backend", "cpu"];
  const serveRefused = await runCli(serveArgs);
  assert.equal(serveRefused.code, 1);
  assert.match(serveRefused.stderr, /^error \[adapter_base_mismatch\]/m);
  const child = spawn(process.execPath, [t2sBin, ...serveArgs, "--allow-base-mismatch"], { stdio: ["ignore", "pipe", "pipe"] });
  let banner = "";
  await new Promise<void>((resolve, reject) => {
    child.stdout.on("data", (d) => {
      banner += d;
      if (/serving shop-sql-4m-tool, sql at/.test(banner)) resolve();
    });
    child.on("exit", (code) => reject(new Error(`t2s serve --allow-base-mismatch exited ${code}: ${banner}`)));
  });
  await new Promise((resolve) => {
    child.removeAllListeners("exit");
    child.on("exit", resolve);
    child.kill("SIGTERM");
  });
  const logits = await runCli(["logits", "--model", OTHER, "--adapter", dir, "--ids", "1,2,3", "--backend", "cpu"]);
  assert.equal(logits.code, 1);
  assert.match(logits.stderr, /^error \[adapter_base_mismatch\]: .*trained on base 'shop-sql-4m'/m);
  assert.equal((await runCli(["logits", "--model", OTHER, "--adapter", dir, "--ids", "1,2,3", "--backend", "cpu", "--allow-base-mismatch"])).code, 0);
  const out = join(scratchDir("t2s-adapter-base-"), "rows.jsonl");
  const bench = ["benchmark", "--policy", `tfjs:${OTHER}+${dir}`, "--tasks", kitPath("data", "shop", "tasks.jsonl"), "--limit", "1", "--k", "1", "--max-tokens", "4", "--out", out, "--quiet"];
  const refused = await runCli(bench, { env: { T2S_BACKEND: "wasm" } });
  assert.equal(refused.code, 1);
  assert.match(refused.stderr, /^error \[adapter_base_mismatch\]/m);
  const ran = await runCli([...bench, "--allow-base-mismatch"], { env: { T2S_BACKEND: "wasm" } });
  assert.equal(ran.code, 0, ran.stderr);
});

test("what the kit saves records its base: saveAdapter, and adapter convert keeps the record", async () => {
  attachAdapter(base, R1, { name: "r1", trainable: true });
  const saved = join(scratchDir("t2s-adapter-base-"), "saved");
  await saveAdapter(base, "r1", saved);
  detachAdapter(base, "r1");
  assert.deepEqual(recordInMetadata(readSafetensorsMetadata(join(saved, "adapter_model.safetensors"))), readBaseRecord(BASE));
  const converted = join(scratchDir("t2s-adapter-base-"), "converted");
  assert.equal((await runCli(["adapter", "convert", "--adapter", saved, "--to", "peft-multimodal", "--out", converted])).code, 0);
  assert.deepEqual(recordInMetadata(readSafetensorsMetadata(join(converted, "adapter_model.safetensors"))), readBaseRecord(BASE));
});

test("training: an init adapter of another base is refused unless allow_base_mismatch; a resume finds the base folder swapped", async () => {
  const dir = tinyTrainingWorld("t2s-adapter-base-train-");
  // the same model with other weights, as a second base
  const otherBase = join(dir, "other");
  cpSync(join(dir, "model"), otherBase, { recursive: true });
  const tensors: Tensors = new Map([...readSafetensors(join(dir, "model", "model.safetensors"))].map(([k, v]) => [k, { shape: v.shape, data: v.data }]));
  tensors.get("model.layers.0.mlp.up_proj.weight")!.data[0] += 0.5;
  writeSafetensors(join(otherBase, "model.safetensors"), tensors, { dtype: "BF16" });
  const cfgOf = (over: Record<string, unknown>) => {
    const p = join(dir, `c${Math.random().toString(36).slice(2)}.json`);
    writeFileSync(p, JSON.stringify({ model: "model", tasks: "tasks.jsonl", output_dir: "out", seed: 1, batch_size: 2, epochs: 2, lr: 0.01, ...over }));
    return p;
  };
  const env = { T2S_BACKEND: "wasm" };
  cpSync(fixtureDir("qwen2-lora"), join(dir, "lora"), { recursive: true });
  assert.equal((await runCli(["adapter", "record", "--base", join(dir, "model"), "--adapter", join(dir, "lora")])).code, 0);
  const onOther = await runCli(["train", "sft", "--config", cfgOf({ model: "other", adapter: { r: 8, init: "lora" } }), "--plan"], { env });
  assert.equal(onOther.code, 1);
  assert.match(onOther.stderr, /^error \[adapter_base_mismatch\]/m);
  const allowed = await runCli(["train", "sft", "--config", cfgOf({ model: "other", adapter: { r: 8, init: "lora", allow_base_mismatch: true } }), "--plan"], { env });
  assert.equal(allowed.code, 0, allowed.stderr);

  const cfg = cfgOf({ adapter: { r: 4, targets: ["q_proj"] }, output_dir: "run" });
  const first = await runCli(["train", "sft", "--config", cfg, "--max-seconds", "0", "--json"], { env });
  assert.equal(first.code, 0, first.stderr);
  const ckpt = join(dir, "run", "checkpoints", "step-000001");
  assert.deepEqual(recordInMetadata(readSafetensorsMetadata(join(ckpt, "adapter_model.safetensors"))), readBaseRecord(join(dir, "model")), "the checkpoint records its base");
  // the model folder now holds other weights under the same path: the config did not change, the base did
  rmSync(join(dir, "model", "model.safetensors"));
  cpSync(join(otherBase, "model.safetensors"), join(dir, "model", "model.safetensors"));
  const resumed = await runCli(["train", "sft", "--config", cfg, "--resume"], { env });
  assert.equal(resumed.code, 1);
  assert.match(resumed.stderr, /^error \[adapter_base_mismatch\]/m);
});

test("a base's record ignores dtype, shards and cosmetic config fields, and sees one changed value or setting", () => {
  const at = (name: string, write: Parameters<typeof copyFixture>[1], config?: (c: Record<string, unknown>) => void): string => {
    const d = copyFixture("qwen2", write);
    if (config) {
      const c = JSON.parse(readFileSync(join(d, "config.json"), "utf8"));
      config(c);
      writeFileSync(join(d, "config.json"), JSON.stringify(c, null, 4));
    }
    return d;
  };
  const want = readBaseRecord(fixtureDir("qwen2"));
  const f32 = at("f32", (d, t) => writeSafetensors(join(d, "model.safetensors"), t, { dtype: "F32" }), (c) => (c.transformers_version = "9.9.9"));
  const sharded = at("sharded", (d, t) => {
    const names = [...t.keys()];
    const half = Math.ceil(names.length / 2);
    const map: Record<string, string> = {};
    for (const [i, part] of [names.slice(0, half), names.slice(half)].entries()) {
      const file = `model-0000${i + 1}-of-00002.safetensors`;
      writeSafetensors(join(d, file), new Map(part.map((n) => [n, t.get(n)!])), { dtype: "BF16" });
      for (const n of part) map[n] = file;
    }
    writeFileSync(join(d, "model.safetensors.index.json"), JSON.stringify({ weight_map: map }));
  });
  const nudged = at("nudged", (d, t) => {
    const w = t.get("model.layers.1.mlp.down_proj.weight")!;
    w.data[w.data.length - 1] += 0.25;
    writeSafetensors(join(d, "model.safetensors"), t, { dtype: "BF16" });
  });
  const rope = at("rope", (d, t) => writeSafetensors(join(d, "model.safetensors"), t, { dtype: "BF16" }), (c) => ((c.rope_parameters as Record<string, unknown>).rope_theta = 10000));
  assert.deepEqual(baseDifferences(want, readBaseRecord(f32)), [], "float32 copy of a bf16 base, another transformers_version");
  assert.deepEqual(baseDifferences(want, readBaseRecord(sharded)), [], "two shards");
  assert.deepEqual(baseDifferences(want, readBaseRecord(nudged)), ["weight values"]);
  assert.deepEqual(baseDifferences(want, readBaseRecord(rope)), ["config.json"]);
  for (const d of [f32, sharded, nudged, rope]) rmSync(d, { recursive: true, force: true });
});
