import { test } from "node:test";
import assert from "node:assert/strict";
import { writeFileSync } from "node:fs";
import { join, resolve } from "node:path";
import { useCpu } from "./tiny-lm.js";
import { tinyTrainingWorld } from "./tiny-world.js";
import { loadModel } from "../../lib/model/load.js";
import { ChatEngine } from "../../lib/model/chat.js";
import { readConfig, validateConfig } from "../../lib/train/config.js";
import { runTraining } from "../../lib/train/run.js";
import { episodeGrader, ModelPolicy } from "../../lib/train/episode-sampler.js";
import type { ChatMessage } from "../../lib/policy/types.js";

await useCpu();

const msgs = (q: string): ChatMessage[] => [{ role: "user", content: q }];

test("concurrent turns are batched, recorded as prompt (masked) + generated ids, and fixed by their seeds", async () => {
  const model = await loadModel(resolve("test/fixtures/model/qwen2"), { backend: "cpu" });
  const policy = new ModelPolicy(model, { adapter: null });
  const a = policy.recording();
  const b = policy.recording();
  const [ra, rb] = await Promise.all([a.complete(msgs("count pets"), { max_tokens: 5, seed: 11 }), b.complete(msgs("name of pet two?"), { max_tokens: 5, seed: 12 })]);
  assert.equal(a.rows.length, 1);
  const row = a.rows[0];
  const prompt = policy.promptIds(msgs("count pets"));
  assert.deepEqual(row.ids.slice(0, prompt.length), prompt);
  assert.equal(row.ids.length, prompt.length + ra[0].tokens_out);
  assert.deepEqual(row.mask, row.ids.map((_, i) => (i < prompt.length ? 0 : 1)));
  assert.equal(row.logprobs!.filter((x) => Number.isFinite(x)).length, ra[0].tokens_out);
  // the same request alone gives the same tokens: the batch it lands in does not matter
  const alone = policy.recording();
  const again = await alone.complete(msgs("name of pet two?"), { max_tokens: 5, seed: 12 });
  assert.deepEqual(alone.rows[0].ids, b.rows[0].ids);
  assert.equal(again[0].text, rb[0].text);
  model.dispose();
});

/** Records the temperature and top_p of every request the chat engine receives while `fn` runs. */
async function engineSampling<T>(fn: () => Promise<T>): Promise<{ value: T; seen: Array<{ temperature?: number; topP?: number }> }> {
  const seen: Array<{ temperature?: number; topP?: number }> = [];
  const original = ChatEngine.prototype.complete;
  ChatEngine.prototype.complete = function (this: ChatEngine, req, hooks) {
    seen.push({ temperature: req.temperature, topP: req.topP });
    return original.call(this, req, hooks);
  };
  try {
    return { value: await fn(), seen };
  } finally {
    ChatEngine.prototype.complete = original;
  }
}

test("each request's temperature and top_p reach the engine", async () => {
  const model = await loadModel(resolve("test/fixtures/model/qwen2"), { backend: "cpu" });
  const policy = new ModelPolicy(model, { adapter: null });
  const { seen } = await engineSampling(() => policy.recording().complete(msgs("count pets"), { max_tokens: 3, seed: 1, temperature: 0.5, top_p: 0.8 }));
  assert.deepEqual(seen, [{ temperature: 0.5, topP: 0.8 }]);
  await policy.close();
  model.dispose();
});

test("a GRPO run samples every episode turn at its config's sampling.temperature and top_p", async () => {
  const dir = tinyTrainingWorld("t2s-sampling-");
  const cfgPath = join(dir, "grpo.json");
  writeFileSync(cfgPath, JSON.stringify({ model: "model", tasks: "tasks.jsonl", output_dir: "out", seed: 1, steps: 1, prompts_per_step: 1, group_size: 2, adapter: { r: 2 }, sampling: { temperature: 0.5, top_p: 0.9, max_tokens: 4 } }));
  const { value, seen } = await engineSampling(() => runTraining(readConfig(cfgPath, "grpo"), { backend: "cpu" }));
  assert.equal(value.steps, 1);
  assert.equal(seen.length, 2, "one turn per episode of the group");
  assert.deepEqual(seen, [{ temperature: 0.5, topP: 0.9 }, { temperature: 0.5, topP: 0.9 }]);
});

test("episodeGrader: with min_tool_calls an episode without enough valid calls earns at most 0; correct stays the verifier's", async () => {
  const rollout = (reward: number, correct: boolean, calls: number, invalid: number) =>
    ({ rows: [], truncated: false, info: { task: {}, result: { grade: { reward, correct }, n_tool_calls: calls, invalid_tool_calls: invalid } } }) as unknown as Parameters<ReturnType<typeof episodeGrader>>[1];
  const task = {} as Parameters<ReturnType<typeof episodeGrader>>[0];
  const probing = episodeGrader({ minToolCalls: 1 });
  assert.deepEqual(await probing(task, rollout(1, true, 0, 0)), { reward: 0, correct: true }, "a correct one-shot answer is not rewarded");
  assert.deepEqual(await probing(task, rollout(0.95, true, 1, 1)), { reward: 0, correct: true }, "an invalid call is not a probe");
  assert.deepEqual(await probing(task, rollout(1, true, 1, 0)), { reward: 1, correct: true });
  assert.deepEqual(await probing(task, rollout(-1, false, 0, 0)), { reward: -1, correct: false }, "a negative reward is kept");
  assert.deepEqual(await episodeGrader()(task, rollout(1, true, 0, 0)), { reward: 1, correct: true }, "off by default");
});

test("episode.min_tool_calls is read from a GRPO config (default 0)", () => {
  const base = { model: "m", tasks: "t", output_dir: "o", steps: 1 };
  assert.equal(validateConfig(base, "grpo").episode.min_tool_calls, 0);
  assert.equal(validateConfig({ ...base, episode: { style: "tool", min_tool_calls: 1 } }, "grpo").episode.min_tool_calls, 1);
  assert.throws(() => validateConfig({ ...base, episode: { min_tool_calls: -1 } }, "grpo"), /min_tool_calls/);
});

test("episode.min_tool_calls that no episode can meet is refused, naming the field", () => {
  const base = { model: "m", tasks: "t", output_dir: "o", steps: 1 };
  assert.throws(() => validateConfig({ ...base, episode: { min_tool_calls: 1 } }, "grpo"), /episode\.min_tool_calls.*style "tool"/);
  assert.throws(() => validateConfig({ ...base, episode: { style: "tool", max_tool_calls: 2, min_tool_calls: 3 } }, "grpo"), /episode\.min_tool_calls.*max_tool_calls \(2\)/);
});
