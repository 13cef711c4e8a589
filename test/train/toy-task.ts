/**
 * A toy verifier task for the GRPO tests: given prompt token p, the policy must emit p+1, p+2, p+3
 * (mod 5, shifted into 1..5) and then EOS (0). Reward = fraction of the 4 positions right; correct = all.
 * Sampling runs the tiny LM autoregressively with a seeded RNG; no EOS within 4 tokens = truncated.
 */
import * as tf from "@tensorflow/tfjs-core";
import type { Grader, Rollout, Sampler } from "../../lib/train/grpo.js";
import { SeededRandom } from "../../lib/core/random.js";
import type { TinyLM } from "./tiny-lm.js";

export const EOS = 0;
export const BUDGET = 4;
export const target = (p: number): number[] => [1, 2, 3].map((k) => ((p - 1 + k) % 5) + 1).concat([EOS]);

export function toySampler(lm: TinyLM): Sampler<number> {
  return async (prompts, g, { seed }) => {
    const rng = new SeededRandom(seed);
    const rows = prompts.flatMap((p) => Array.from({ length: g }, () => [p]));
    const logprobs = rows.map(() => [NaN]);
    const done = rows.map(() => false);
    for (let k = 0; k < BUDGET; k++) {
      const probs = tf.tidy(() => {
        const logits = lm.logits(rows.map((r) => r.concat(new Array(1 + k - r.length).fill(EOS))));
        return tf.softmax(tf.squeeze(tf.slice(logits, [0, k, 0], [-1, 1, -1]), [1])).arraySync() as number[][];
      });
      rows.forEach((r, i) => {
        if (done[i]) return;
        let u = rng.next();
        let tok = probs[i].length - 1;
        for (let v = 0; v < probs[i].length; v++) if ((u -= probs[i][v]) < 0) { tok = v; break; }
        r.push(tok);
        logprobs[i].push(Math.log(probs[i][tok]));
        if (tok === EOS) done[i] = true;
      });
    }
    const out: Rollout[][] = prompts.map(() => []);
    rows.forEach((r, i) => out[Math.floor(i / g)].push({ rows: [{ ids: r, mask: r.map((_, t) => (t === 0 ? 0 : 1)), logprobs: logprobs[i] }], truncated: !done[i] }));
    return out;
  };
}

export const toyGrader: Grader<number> = async (p, r) => {
  const want = target(p);
  const got = r.rows[0].ids.slice(1);
  const hits = want.filter((w, k) => got[k] === w).length;
  return { reward: hits / want.length, correct: hits === want.length };
};
