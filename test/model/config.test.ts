import { test } from "node:test";
import assert from "node:assert/strict";
import { parseConfig } from "../../lib/model/config.js";
import { inverseFrequencies } from "../../lib/model/rope.js";
import { isT2sError } from "../../lib/core/errors.js";

const base = { hidden_size: 64, intermediate_size: 96, num_hidden_layers: 2, num_attention_heads: 4, num_key_value_heads: 2, vocab_size: 100 };

test("older config layout: rope_theta and rope_scaling at the top level", () => {
  const c = parseConfig({ ...base, architectures: ["LlamaForCausalLM"], rope_theta: 500000, rope_scaling: { rope_type: "llama3", factor: 8, low_freq_factor: 1, high_freq_factor: 4, original_max_position_embeddings: 16 } });
  assert.equal(c.ropeTheta, 500000);
  assert.equal(c.ropeScaling.type, "llama3");
  assert.equal(c.headDim, 16);
  assert.equal(c.tieWordEmbeddings, false);
  assert.equal(c.attentionBias, false);
});

test("newer layout (rope_parameters), Qwen2 bias and Qwen3 q/k norm with explicit head_dim", () => {
  const q2 = parseConfig({ ...base, architectures: ["Qwen2ForCausalLM"], rope_parameters: { rope_theta: 1e6, rope_type: "default" }, tie_word_embeddings: true, eos_token_id: [5, 6] });
  assert.equal(q2.ropeTheta, 1e6);
  assert.equal(q2.attentionBias, true);
  assert.equal(q2.tieWordEmbeddings, true);
  assert.deepEqual(q2.eosTokenIds, [5, 6]);
  const q3 = parseConfig({ ...base, architectures: ["Qwen3ForCausalLM"], head_dim: 32 });
  assert.equal(q3.qkNorm, true);
  assert.equal(q3.headDim, 32);
});

test("unsupported architectures and bad values are clear errors", () => {
  assert.throws(() => parseConfig({ ...base, architectures: ["GPT2LMHeadModel"] }), (e) => isT2sError(e, "unsupported_model") && /GPT2LMHeadModel/.test(e.message));
  assert.throws(() => parseConfig({ ...base, architectures: ["LlamaForCausalLM"], num_key_value_heads: 3 }), (e) => isT2sError(e, "bad_config"));
  assert.throws(() => parseConfig({ architectures: ["LlamaForCausalLM"], hidden_size: 64 }), (e) => isT2sError(e, "bad_config") && /intermediate_size|num_attention_heads/.test(e.message));
});

test("llama3 rope scaling keeps high frequencies and divides low ones by the factor", () => {
  const plain = inverseFrequencies(16, 10000, { type: "default" });
  const scaled = inverseFrequencies(16, 10000, { type: "llama3", factor: 8, lowFreqFactor: 1, highFreqFactor: 4, originalMaxPositions: 64 });
  assert.equal(scaled[0], plain[0]);
  assert.ok(Math.abs(scaled[7] - plain[7] / 8) < 1e-12);
});
