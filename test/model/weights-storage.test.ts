/**
 * Checkpoints as Hugging Face writes them at real sizes: a shard over 2 GiB (built as a sparse file, so the
 * test writes a few KB) loads tensor by tensor and gives the same logits as the fixture's own file; 16-bit
 * storage of bf16 and f16 checkpoints gives the logits and greedy tokens of float32 storage; a config with
 * fewer layers than the weights is refused.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { closeSync, openSync, rmSync, statSync, writeFileSync, writeSync, ftruncateSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { loadModel } from "../../lib/model/load.js";
import { writeSafetensors, type StDtype } from "../../lib/model/safetensors.js";
import { isPacked } from "../../lib/model/packed.js";
import { isT2sError } from "../../lib/core/errors.js";
import { ARCH_FIXTURES, copyFixture, fixtureDir, maxAbsDiff, readReference } from "./fixtures.js";

/**
 * Writes `tensors` as one shard whose data starts after a hole of `gap` bytes (a tensor no index entry
 * names), so the file is larger than 2 GiB while holding a few KB, and an index naming that shard.
 */
function writeSparseShard(dir: string, tensors: Map<string, { shape: number[]; data: Float32Array }>, gap: number): string {
  const names = [...tensors.keys()].sort();
  const header: Record<string, unknown> = { __metadata__: { format: "pt" }, "padding.unused": { dtype: "F32", shape: [gap / 4], data_offsets: [0, gap] } };
  let offset = gap;
  const parts: Buffer[] = [];
  for (const n of names) {
    const t = tensors.get(n)!;
    const bytes = Buffer.from(t.data.buffer, t.data.byteOffset, t.data.byteLength);
    header[n] = { dtype: "F32", shape: t.shape, data_offsets: [offset, offset + bytes.length] };
    parts.push(bytes);
    offset += bytes.length;
  }
  let json = JSON.stringify(header);
  while ((8 + json.length) % 8) json += " ";
  const file = join(dir, "model-00001-of-00001.safetensors");
  const fd = openSync(file, "w");
  const len = Buffer.alloc(8);
  len.writeBigUInt64LE(BigInt(json.length));
  writeSync(fd, len, 0, 8, 0);
  writeSync(fd, Buffer.from(json), 0, json.length, 8);
  const dataStart = 8 + json.length;
  let at = dataStart + gap;
  for (const p of parts) {
    writeSync(fd, p, 0, p.length, at);
    at += p.length;
  }
  ftruncateSync(fd, at);
  closeSync(fd);
  const weight_map = Object.fromEntries(names.map((n) => [n, "model-00001-of-00001.safetensors"]));
  writeFileSync(join(dir, "model.safetensors.index.json"), JSON.stringify({ metadata: {}, weight_map }));
  return file;
}

test("a shard over 2 GiB loads by offset and gives the same logits as the fixture's file", async () => {
  const ref = readReference("qwen2");
  const dir = copyFixture("qwen2", (d, t) => writeSparseShard(d, t, 2 ** 31 + 4096));
  try {
    assert.ok(statSync(join(dir, "model-00001-of-00001.safetensors")).size > 2 ** 31);
    const model = await loadModel(dir, { backend: "cpu" });
    assert.equal(model.loadInfo?.files, 1);
    for (const s of ref.sequences) assert.ok(maxAbsDiff(s.logits, await model.logitsOf(s.ids)) < 1e-4);
    model.dispose();
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

/** Greedy continuation of `prompt` by `n` tokens through logitsOf (argmax of the last position). */
async function greedy(model: Awaited<ReturnType<typeof loadModel>>, prompt: number[], n: number): Promise<number[]> {
  const seq = prompt.slice();
  for (let i = 0; i < n; i++) {
    const rows = await model.logitsOf(seq);
    const last = rows[rows.length - 1];
    let best = 0;
    for (let j = 1; j < last.length; j++) if (last[j] > last[best]) best = j;
    seq.push(best);
  }
  return seq.slice(prompt.length);
}

for (const dtype of ["BF16", "F16"] as StDtype[]) {
  for (const name of ARCH_FIXTURES) {
    test(`${name}: a ${dtype} checkpoint stored 16-bit gives float32 storage's logits and greedy tokens`, async () => {
      const ref = readReference(name);
      const dir = copyFixture(name, (d, t) => writeSafetensors(join(d, "model.safetensors"), t, { dtype }));
      try {
        const wide = await loadModel(dir, { backend: "cpu", weightsDtype: "fp32" });
        const packed = await loadModel(dir, { backend: "cpu", weightsDtype: "bf16" });
        assert.equal(isPacked(wide.weights.layers[0].q.weight), false);
        assert.equal(isPacked(packed.weights.layers[0].q.weight), true);
        assert.equal(isPacked(packed.weights.embed), true);
        // the matrices take the checkpoint's own 2 bytes per value
        assert.ok(packed.loadInfo!.packedBytes > 0 && packed.loadInfo!.weightBytes < wide.loadInfo!.weightBytes * 0.55, `${packed.loadInfo!.weightBytes} vs ${wide.loadInfo!.weightBytes}`);
        for (const s of ref.sequences) {
          const a = await wide.logitsOf(s.ids);
          const b = await packed.logitsOf(s.ids);
          assert.ok(maxAbsDiff(a.map((r) => Array.from(r)), b) < 1e-4, `${name} ${dtype}: logits differ`);
        }
        assert.deepEqual(await greedy(packed, ref.greedy.prompt, 6), await greedy(wide, ref.greedy.prompt, 6));
        wide.dispose();
        packed.dispose();
      } finally {
        rmSync(dir, { recursive: true, force: true });
      }
    });
  }
}

test("auto keeps a bf16 checkpoint float32 on the CPU backend (16-bit storage is for the GPU)", async () => {
  const dir = copyFixture("qwen2", (d, t) => writeSafetensors(join(d, "model.safetensors"), t, { dtype: "BF16" }));
  try {
    const model = await loadModel(dir, { backend: "cpu" });
    assert.equal(model.loadInfo?.storage, "fp32");
    assert.equal(model.loadInfo?.checkpointDtype, "BF16");
    model.dispose();
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test("a config.json with fewer layers than the weights is refused", async () => {
  const dir = copyFixture("qwen2", (d, t) => writeSafetensors(join(d, "model.safetensors"), t));
  try {
    const cfg = JSON.parse(readFileSync(join(dir, "config.json"), "utf8"));
    cfg.num_hidden_layers -= 1;
    writeFileSync(join(dir, "config.json"), JSON.stringify(cfg));
    await assert.rejects(loadModel(dir, { backend: "cpu" }), (e) => isT2sError(e, "bad_checkpoint") && /num_hidden_layers/.test(e.message));
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test("an unknown weights dtype is a usage error naming the choices", async () => {
  await assert.rejects(loadModel(fixtureDir("qwen2"), { backend: "cpu", weightsDtype: "int4" as never }), (e) => isT2sError(e, "usage") && /auto, fp32, bf16/.test(e.message));
});
