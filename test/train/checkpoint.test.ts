import { test } from "node:test";
import assert from "node:assert/strict";
import { existsSync, readdirSync } from "node:fs";
import { join } from "node:path";
import * as tf from "@tensorflow/tfjs-core";
import { useCpu } from "./tiny-lm.js";
import { isT2sError } from "../../lib/core/errors.js";
import { latestCheckpoint, saveCheckpoint } from "../../lib/train/checkpoint.js";
import { AdamW } from "../../lib/train/optimizer.js";
import { scratchDir } from "../helpers.js";

await useCpu();

test("a diverged run writes no checkpoint: NaN weights are refused before anything lands on disk", async () => {
  const dir = scratchDir();
  const w = tf.variable(tf.tensor1d([1, 2, 3]), true, "ckpt.nan");
  const params = [{ name: "w", variable: w }];
  const opt = new AdamW(params, {});
  const ok = await saveCheckpoint(dir, params, opt, { step: 1, rng: {}, extra: {} });
  assert.equal(latestCheckpoint(dir), ok);
  w.assign(tf.tensor1d([1, Number.NaN, 3]));
  await assert.rejects(saveCheckpoint(dir, params, opt, { step: 2, rng: {}, extra: {} }), (e) => isT2sError(e, "non_finite") && /w holds NaN.*after step 2/.test(e.message));
  assert.deepEqual(readdirSync(join(dir, "checkpoints")), ["step-000001"], "no step-2 folder, no temp folder");
  assert.ok(!existsSync(join(dir, "checkpoints", "step-000002")));
  opt.dispose();
  w.dispose();
});
