/**
 * `t2s adapter check` reads adapter_config.json and the special weights, and says per runtime (the kit,
 * PEFT, vLLM) what happens: per-module patterns, DoRA by flag or by keys, embedding LoRA, bias and
 * modules_to_save, each one line whatever the number of keys, failing or warning as the runtime would.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { readSafetensors, writeSafetensors } from "../../lib/model/safetensors.js";
import { kitPath } from "../../lib/core/paths.js";
import { runCli, scratchDir } from "../helpers.js";

const BASE = kitPath("data", "models", "shop-sql-4m");
const R1 = kitPath("data", "models", "shop-sql-4m-grpo-r1");
const HIDDEN = 256;
const VOCAB = 4096;

type Tensors = Map<string, { shape: number[]; data: Float32Array }>;

function r1Tensors(): Tensors {
  const out: Tensors = new Map();
  for (const [k, t] of readSafetensors(join(R1, "adapter_model.safetensors"))) out.set(k, { shape: t.shape, data: t.data });
  return out;
}

function filled(shape: number[], v = 0.01): { shape: number[]; data: Float32Array } {
  return { shape, data: new Float32Array(shape.reduce((a, b) => a * b, 1)).fill(v) };
}

/** An adapter folder: the round-1 weights plus `extra`, the round-1 config with `config` merged in. */
function adapter(name: string, config: Record<string, unknown>, extra: (t: Tensors) => void = () => {}): string {
  const dir = join(scratchDir("t2s-adapter-cfg-"), name);
  mkdirSync(dir, { recursive: true });
  const t = r1Tensors();
  extra(t);
  writeSafetensors(join(dir, "adapter_model.safetensors"), t);
  const base = JSON.parse(readFileSync(join(R1, "adapter_config.json"), "utf8"));
  writeFileSync(join(dir, "adapter_config.json"), JSON.stringify({ ...base, ...config }));
  return dir;
}

async function check(dir: string, forWhat?: string): Promise<{ code: number; fails: string[]; warns: string[]; out: string }> {
  const r = await runCli(["adapter", "check", "--base", BASE, "--adapter", dir, ...(forWhat ? ["--for", forWhat] : [])]);
  const lines = r.stdout.split("\n");
  return { code: r.code, fails: lines.filter((l) => l.startsWith("FAIL ")), warns: lines.filter((l) => l.startsWith("WARN ")), out: r.stdout + r.stderr };
}

test("rank_pattern / alpha_pattern: vLLM's one global scale fails the check for vLLM only", async () => {
  const dir = adapter("pattern", { alpha_pattern: { q_proj: 64 }, rank_pattern: { v_proj: 16 } });
  const all = await check(dir);
  assert.equal(all.code, 1, all.out);
  assert.equal(all.fails.length, 1, all.out);
  assert.match(all.fails[0], /^FAIL rank_pattern and alpha_pattern in adapter_config\.json \(4 module\(s\) scaled unlike lora_alpha\/r\): the kit applies/);
  assert.match(all.fails[0], /vLLM ignores the patterns and scales every module by lora_alpha\/r/);
  assert.equal((await check(dir, "peft")).code, 0);
  assert.equal((await check(dir, "kit")).code, 0);
  // a pattern that sets the global values changes no scale: nothing to report for vLLM
  const same = await check(adapter("same", { alpha_pattern: { q_proj: 32 } }), "vllm");
  assert.equal(same.code, 0, same.out);
});

test("DoRA by flag without magnitudes, and by magnitude keys without the flag, each one line", async () => {
  const flag = await check(adapter("dora-flag", { use_dora: true }), "peft");
  assert.equal(flag.code, 1);
  assert.equal(flag.fails.length, 1, flag.out);
  assert.match(flag.fails[0], /^FAIL DoRA \(use_dora in adapter_config\.json\): the kit refuses DoRA adapters/);
  assert.match(flag.fails[0], /PEFT finds no magnitude weights and keeps freshly initialised ones/);
  const magnitudes = (t: Tensors) => {
    for (let l = 0; l < 4; l++) for (const m of ["q_proj", "k_proj"]) t.set(`base_model.model.model.layers.${l}.self_attn.${m}.lora_magnitude_vector`, filled([m === "q_proj" ? HIDDEN : 64], 1));
  };
  const keys = await check(adapter("dora-keys", {}, magnitudes), "peft");
  assert.equal(keys.code, 1, keys.out);
  assert.equal(keys.fails.length, 1, keys.out);
  assert.match(keys.fails[0], /DoRA \(8 lora_magnitude_vector weight\(s\)\).*PEFT drops the magnitude weights/);
  assert.doesNotMatch(keys.out, /not LoRA A\/B matrices|shape mismatch/);
  const both = adapter("dora", { use_dora: true }, magnitudes);
  assert.equal((await check(both, "peft")).code, 0);
  const served = await check(both, "vllm");
  assert.equal(served.code, 1);
  assert.match(served.fails[0], /vLLM refuses DoRA adapters/);
});

test("an embed_tokens LoRA fails for the kit (its serve refuses it) and warns for vLLM", async () => {
  const dir = adapter("embed", { target_modules: ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj", "embed_tokens"] }, (t) => {
    t.set("base_model.model.model.embed_tokens.lora_embedding_A", filled([16, VOCAB]));
    t.set("base_model.model.model.embed_tokens.lora_embedding_B", filled([HIDDEN, 16]));
  });
  const all = await check(dir);
  assert.equal(all.code, 1, all.out);
  assert.equal(all.fails.length, 1, all.out);
  assert.match(all.fails[0], /^FAIL embedding LoRA \(2 embed_tokens LoRA weight\(s\)\): the kit refuses it/);
  const vllm = await check(dir, "vllm");
  assert.equal(vllm.code, 0, vllm.out);
  assert.equal(vllm.warns.length, 1);
  assert.match(vllm.warns[0], /vLLM places it only for model classes that declare embed_tokens LoRA support/);
  assert.equal((await check(dir, "peft")).code, 0);
});

test("LoRA bias weights are one finding, not a shape mismatch per key", async () => {
  const dir = adapter("bias", { bias: "lora_only" }, (t) => {
    for (const k of [...t.keys()]) if (k.endsWith("lora_B.weight")) t.set(k.replace(/weight$/, "bias"), filled([t.get(k)!.shape[0]]));
  });
  const r = await check(dir);
  assert.equal(r.code, 1);
  assert.equal(r.fails.length, 1, r.out);
  assert.match(r.fails[0], /^FAIL bias \(bias: "lora_only" in adapter_config\.json, 28 bias weight\(s\)\): the kit refuses bias weights; PEFT applies them; vLLM refuses/);
  assert.doesNotMatch(r.out, /shape mismatch/);
  assert.equal((await check(dir, "peft")).code, 0);
});

test("modules_to_save: one line, the saved weights not reported as stray keys", async () => {
  const dir = adapter("saved", { modules_to_save: ["lm_head"] }, (t) => t.set("base_model.model.lm_head.weight", filled([VOCAB, HIDDEN])));
  const r = await check(dir);
  assert.equal(r.code, 1);
  assert.equal(r.fails.length, 1, r.out);
  assert.match(r.fails[0], /^FAIL modules_to_save \(lm_head in adapter_config\.json, 1 fully saved weight\(s\)\): the kit refuses fully saved modules; PEFT replaces those modules with the saved copies; vLLM refuses adapters with modules_to_save/);
  assert.doesNotMatch(r.out, /not LoRA A\/B matrices/);
  const json = JSON.parse((await runCli(["adapter", "check", "--base", BASE, "--adapter", dir, "--json"])).stdout);
  assert.deepEqual(json.findings.map((f: { cause: string }) => f.cause), ["modules_to_save"]);
  assert.equal(json.findings[0].runtimes.peft.verdict, "ok");
  assert.equal(json.ok, false);
});
