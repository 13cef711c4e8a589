import { test } from "node:test";
import assert from "node:assert/strict";
import { copyFileSync, readFileSync, writeFileSync, readdirSync, mkdirSync } from "node:fs";
import { join } from "node:path";
import { readCheckpoint, readSafetensors, writeSafetensors } from "../../lib/model/safetensors.js";
import { isT2sError } from "../../lib/core/errors.js";
import { scratchDir } from "../helpers.js";
import { fixtureDir } from "./fixtures.js";

const values = Float32Array.from([0, 1, -2.5, 3.140625, 1e-3, -65504, 0.333251953125, 7]);

test("write/read round trip in F32, F16 and BF16", () => {
  const dir = scratchDir();
  for (const dtype of ["F32", "F16", "BF16"] as const) {
    const f = join(dir, `${dtype}.safetensors`);
    writeSafetensors(f, new Map([["w", { shape: [2, 4], data: values }], ["b", { shape: [1], data: Float32Array.from([2]) }]]), { dtype });
    const got = readSafetensors(f);
    assert.deepEqual(got.get("w")!.shape, [2, 4]);
    assert.equal(got.get("w")!.dtype, dtype);
    const tol = dtype === "F32" ? 0 : dtype === "F16" ? 1e-3 : 1e-2;
    got.get("w")!.data.forEach((v, i) => assert.ok(Math.abs(v - values[i]) <= tol * Math.max(1, Math.abs(values[i])), `${dtype}[${i}] ${v} vs ${values[i]}`));
    assert.equal(got.get("b")!.data[0], 2);
  }
});

test("BF16 and F16 checkpoints written by transformers load (qwen2 is BF16, qwen3 F16)", () => {
  const q2 = readCheckpoint(fixtureDir("qwen2"));
  assert.equal(q2.get("model.embed_tokens.weight")!.dtype, "BF16");
  const q3 = readCheckpoint(fixtureDir("qwen3"));
  assert.equal(q3.get("model.layers.0.self_attn.q_norm.weight")!.dtype, "F16");
});

test("a truncated file names the file and the tensor", () => {
  const dir = scratchDir();
  const f = join(dir, "model.safetensors");
  const src = readFileSync(join(fixtureDir("qwen3"), "model.safetensors"));
  writeFileSync(f, src.subarray(0, src.length - 1000));
  assert.throws(() => readSafetensors(f), (e) => isT2sError(e, "bad_safetensors") && e.message.includes(f) && /tensor \S+ ends at byte/.test(e.message) && /truncated/.test(e.message));
  writeFileSync(f, src.subarray(0, 20));
  assert.throws(() => readSafetensors(f), (e) => isT2sError(e, "bad_safetensors") && /header/.test(e.message));
});

test("a header whose byte range disagrees with the shape is an error naming the tensor", () => {
  const dir = scratchDir();
  const f = join(dir, "x.safetensors");
  const header = JSON.stringify({ w: { dtype: "F32", shape: [3], data_offsets: [0, 8] } });
  const len = Buffer.alloc(8);
  len.writeBigUInt64LE(BigInt(header.length));
  writeFileSync(f, Buffer.concat([len, Buffer.from(header), Buffer.alloc(8)]));
  assert.throws(() => readSafetensors(f), (e) => isT2sError(e, "bad_safetensors") && /tensor w: shape \[3\]/.test(e.message));
});

test("sharded checkpoints load through the index; a shard missing a listed tensor is an error", () => {
  const all = readCheckpoint(fixtureDir("llama"));
  assert.ok(all.has("lm_head.weight") && all.has("model.layers.1.mlp.down_proj.weight"));
  const dir = scratchDir();
  mkdirSync(join(dir, "m"));
  for (const f of readdirSync(fixtureDir("llama"))) copyFileSync(join(fixtureDir("llama"), f), join(dir, "m", f));
  const idx = JSON.parse(readFileSync(join(dir, "m", "model.safetensors.index.json"), "utf8"));
  const shard = idx.weight_map["lm_head.weight"];
  idx.weight_map["lm_head.weight"] = shard === "model-00001-of-00003.safetensors" ? "model-00002-of-00003.safetensors" : "model-00001-of-00003.safetensors";
  writeFileSync(join(dir, "m", "model.safetensors.index.json"), JSON.stringify(idx));
  assert.throws(() => readCheckpoint(join(dir, "m")), (e) => isT2sError(e, "bad_safetensors") && /lm_head\.weight/.test(e.message));
});
