/**
 * The in-process policy `tfjs:<model>+<adapter>` applies the adapter unmerged, beside the frozen base: its
 * logits equal those of the adapter merged into the weights, its greedy replies equal a merged copy's, and
 * loading it adds the adapter's own tensors to the device, never a float32 copy of the matrices it targets.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { tf } from "../../lib/backend/tf.js";
import { loadModel } from "../../lib/model/load.js";
import { attachAdapter, mergedModel } from "../../lib/model/lora.js";
import { ChatEngine } from "../../lib/model/chat.js";
import { tfjsPolicy } from "../../lib/policy/tfjs.js";
import { fixtureDir } from "../model/fixtures.js";

const BASE = fixtureDir("qwen2");
const ADAPTER = fixtureDir("qwen2-lora");
const IDS = [[1, 5, 17, 33, 2, 90, 41, 9], [7, 7, 120, 64, 3, 0, 44, 1]];

test("the unmerged adapter gives the merged weights' logits", async () => {
  const base = await loadModel(BASE, { backend: "cpu" });
  attachAdapter(base, ADAPTER, { name: "a" });
  const merged = await mergedModel(base, ADAPTER);
  const d = tf.tidy(() => tf.max(tf.abs(tf.sub(base.logits(IDS, { adapter: "a" }), merged.logits(IDS)))).dataSync()[0]);
  const moved = tf.tidy(() => tf.max(tf.abs(tf.sub(base.logits(IDS), merged.logits(IDS)))).dataSync()[0]);
  assert.ok(moved > 1e-3, `the adapter changes the logits (${moved})`);
  assert.ok(d < 1e-4, `unmerged vs merged logits differ by ${d}`);
  merged.dispose();
  base.dispose();
});

test("tfjs:<model>+<adapter> answers as the merged copy does and holds no copy of the base", async () => {
  process.env.T2S_BACKEND = "cpu";
  const request = { messages: [{ role: "user" as const, content: "How many orders?" }], max_tokens: 8, temperature: 0, n: 1, seed: 1 };
  // bytes on the device for the base alone, and for the policy (base + adapter) before any request
  const before = tf.memory().numBytes;
  const base = await loadModel(BASE, { backend: "cpu" });
  const baseBytes = tf.memory().numBytes - before;
  const merged = await mergedModel(base, ADAPTER);
  const mergedBytes = tf.memory().numBytes - before - baseBytes;
  const reference = await new ChatEngine(merged).complete({ model: merged.name, messages: request.messages, maxTokens: 8, temperature: 0, n: 1, seed: 1 });
  merged.dispose();
  base.dispose();
  const start = tf.memory().numBytes;
  const policy = await tfjsPolicy(`${BASE}+${ADAPTER}`, { backend: "cpu" });
  const policyBytes = tf.memory().numBytes - start;
  // qwen2-lora: r 2 on q_proj and v_proj of 2 layers (hidden 64): A [2, 64] and B [out, 2] per module
  const adapterBytes = 2 * 4 * (2 * 64 + 64 * 2 + 2 * 64 + 32 * 2);
  assert.ok(mergedBytes >= 2 * 4 * (64 * 64 + 32 * 64), `the merged copy adds the targeted matrices (${mergedBytes} bytes)`);
  assert.ok(policyBytes <= baseBytes + adapterBytes, `the policy holds ${policyBytes} bytes: base ${baseBytes} + adapter ${adapterBytes} at most`);
  const [c] = await policy.complete(request.messages, request);
  assert.equal(c.text, reference.choices[0].content ?? "");
  await policy.close?.();
});
