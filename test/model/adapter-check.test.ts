import { test } from "node:test";
import assert from "node:assert/strict";
import { copyFileSync, mkdirSync } from "node:fs";
import { join } from "node:path";
import { keyInLayout, parseLoraKey, vllmModuleName } from "../../lib/model/lora-layout.js";
import { loraKey } from "../../lib/model/lora.js";
import { readCheckpoint, readSafetensors, writeSafetensors } from "../../lib/model/safetensors.js";
import { kitPath } from "../../lib/core/paths.js";
import { runCli, scratchDir } from "../helpers.js";

const BASE = kitPath("data", "models", "shop-sql-4m");
const R1 = kitPath("data", "models", "shop-sql-4m-grpo-r1");

/** Writes an adapter folder with the round-1 config and the given tensors. */
function writeAdapter(dir: string, tensors: Map<string, { shape: number[]; data: Float32Array }>): string {
  mkdirSync(dir, { recursive: true });
  copyFileSync(join(R1, "adapter_config.json"), join(dir, "adapter_config.json"));
  writeSafetensors(join(dir, "adapter_model.safetensors"), tensors);
  return dir;
}

function renamed(fn: (key: string) => string): Map<string, { shape: number[]; data: Float32Array }> {
  const out = new Map<string, { shape: number[]; data: Float32Array }>();
  for (const [k, t] of readSafetensors(join(R1, "adapter_model.safetensors"))) out.set(fn(k), { shape: t.shape, data: t.data });
  return out;
}

test("weight names parse into layout and decoder path, and rewrite between layouts", () => {
  const k = parseLoraKey("base_model.model.model.layers.3.self_attn.q_proj.lora_A.weight")!;
  assert.equal(k.layout, "peft");
  assert.equal(k.inner, "layers.3.self_attn.q_proj");
  assert.equal(keyInLayout(k, "peft-multimodal"), "base_model.model.model.language_model.layers.3.self_attn.q_proj.lora_A.weight");
  assert.equal(keyInLayout(k, "vllm-multimodal"), "base_model.model.language_model.model.layers.3.self_attn.q_proj.lora_A.weight");
  const named = parseLoraKey("base_model.model.model.language_model.layers.0.mlp.up_proj.lora_B.default.weight")!;
  assert.equal(named.layout, "peft-multimodal");
  assert.equal(keyInLayout(named, "peft"), "base_model.model.model.layers.0.mlp.up_proj.lora_B.default.weight");
  const head = parseLoraKey("base_model.model.lm_head.lora_A.weight")!;
  assert.equal(keyInLayout(head, "vllm-multimodal"), "base_model.model.language_model.lm_head.lora_A.weight");
  assert.equal(parseLoraKey("model.layers.0.self_attn.q_proj.weight"), null);
  assert.equal(loraKey(2, "down_proj", "B"), "base_model.model.model.layers.2.mlp.down_proj.lora_B.weight");
  assert.equal(vllmModuleName("model.language_model.layers.1.mlp.up_proj", true), "language_model.model.layers.1.mlp.up_proj");
  assert.equal(vllmModuleName("model.layers.1.mlp.up_proj", false), "model.layers.1.mlp.up_proj");
});

test("adapter check passes the shipped round-1 adapter, fails a renamed copy naming its keys, and passes it after convert", async () => {
  const ok = await runCli(["adapter", "check", "--base", BASE, "--adapter", R1, "--json"]);
  assert.equal(ok.code, 0, ok.stdout + ok.stderr);
  const r = JSON.parse(ok.stdout);
  assert.equal(r.ok, true);
  assert.equal(r.peft.matched, r.keys);
  assert.equal(r.vllm.matched, r.keys);

  const dir = scratchDir("t2s-adapter-");
  const moved = writeAdapter(join(dir, "moved"), renamed((k) => k.replace("base_model.model.model.", "base_model.model.model.language_model.")));
  const bad = await runCli(["adapter", "check", "--base", BASE, "--adapter", moved]);
  assert.equal(bad.code, 1);
  assert.match(bad.stdout, /FAIL 56 of 56 weight\(s\) name no module of the base under PEFT's names/);
  assert.match(bad.stdout, /base_model\.model\.model\.language_model\.layers\.0\.mlp\.down_proj\.lora_A\.weight/);
  assert.match(bad.stdout, /t2s adapter convert --to peft fixes the names/);

  const fixed = join(dir, "fixed");
  const conv = await runCli(["adapter", "convert", "--adapter", moved, "--to", "peft", "--out", fixed]);
  assert.equal(conv.code, 0, conv.stderr);
  assert.match(conv.stdout, /56 of 56 weight names rewritten in the peft layout/);
  const again = await runCli(["adapter", "check", "--base", BASE, "--adapter", fixed]);
  assert.equal(again.code, 0, again.stdout);
  assert.match(again.stdout, /^PASS/m);
  // same names and values as the shipped file
  const orig = readSafetensors(join(R1, "adapter_model.safetensors"));
  const back = readSafetensors(join(fixed, "adapter_model.safetensors"));
  assert.deepEqual([...back.keys()].sort(), [...orig.keys()].sort());
  for (const [k, t] of orig) assert.deepEqual(back.get(k)!.data, t.data, k);

  const refuse = await runCli(["adapter", "convert", "--adapter", moved, "--to", "peft", "--out", fixed]);
  assert.equal(refuse.code, 1);
  assert.match(refuse.stderr, /error \[exists\]/);
});

test("a partly matched adapter and a no-op adapter exit 1 naming the keys", async () => {
  const dir = scratchDir("t2s-adapter-");
  const partly = writeAdapter(join(dir, "partly"), renamed((k) => k.replace(".layers.1.", ".layers.9.")));
  const p = await runCli(["adapter", "check", "--base", BASE, "--adapter", partly]);
  assert.equal(p.code, 1);
  assert.match(p.stdout, /PEFT places 42 of 56/);
  assert.match(p.stdout, /layers\.9\.mlp\.down_proj\.lora_A\.weight/);

  const zero = new Map([...renamed((k) => k)].map(([k, t]) => [k, k.includes("lora_B") ? { shape: t.shape, data: new Float32Array(t.data.length) } : t]));
  const noop = writeAdapter(join(dir, "noop"), zero);
  const n = await runCli(["adapter", "check", "--base", BASE, "--adapter", noop]);
  assert.equal(n.code, 1);
  assert.match(n.stdout, /changes nothing \(a no-op\)/);
  assert.match(n.stdout, /lora_B\.weight/);

  const usage = await runCli(["adapter", "check", "--base", BASE, "--adapter", R1, "--for", "tgi"]);
  assert.equal(usage.code, 2);
  const missing = await runCli(["adapter", "check", "--base", join(dir, "nope"), "--adapter", R1]);
  assert.equal(missing.code, 1);
  assert.match(missing.stderr, /^error \[missing_file\]/);
});

test("on a multimodal base a text-path adapter fails under both servers; peft-multimodal and vLLM names place where they should", async () => {
  const dir = scratchDir("t2s-adapter-");
  const mmBase = join(dir, "mm-base");
  mkdirSync(mmBase, { recursive: true });
  const weights = new Map<string, { shape: number[]; data: Float32Array }>();
  for (const [k, t] of readCheckpoint(BASE)) weights.set(k.startsWith("model.") ? k.replace("model.", "model.language_model.") : k, { shape: t.shape, data: t.data });
  writeSafetensors(join(mmBase, "model.safetensors"), weights);

  const text = await runCli(["adapter", "check", "--base", mmBase, "--adapter", R1, "--json"]);
  assert.equal(text.code, 1);
  const t = JSON.parse(text.stdout);
  assert.equal(t.multimodal, true);
  assert.equal(t.peft.matched, 0);
  assert.equal(t.vllm.matched, 0);

  const hf = join(dir, "hf");
  assert.equal((await runCli(["adapter", "convert", "--adapter", R1, "--to", "peft-multimodal", "--out", hf])).code, 0);
  assert.equal((await runCli(["adapter", "check", "--base", mmBase, "--adapter", hf, "--for", "both"])).code, 0);
  // the kit serves text decoders only: its own loader refuses the base, so `all` (the default) fails
  const kit = await runCli(["adapter", "check", "--base", mmBase, "--adapter", hf]);
  assert.equal(kit.code, 1);
  assert.match(kit.stdout, /FAIL the kit refuses it .*config\.json/);

  const vl = join(dir, "vllm");
  const conv = await runCli(["adapter", "convert", "--adapter", R1, "--to", "vllm", "--base", mmBase, "--out", vl]);
  assert.match(conv.stdout, /vllm-multimodal layout/);
  assert.equal((await runCli(["adapter", "check", "--base", mmBase, "--adapter", vl, "--for", "vllm"])).code, 0);
  const peftRules = await runCli(["adapter", "check", "--base", mmBase, "--adapter", vl, "--for", "peft"]);
  assert.equal(peftRules.code, 1);
  assert.match(peftRules.stdout, /convert --to peft-multimodal/);
});
