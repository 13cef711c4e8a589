/**
 * Reward presets: the training signal as a pure function of the outcome and a few episode facts.
 * `correct` is always reported separately; a reward is never used as the evaluation truth.
 *  - shaped:  1 correct; 0.1 when the query ran but the answer is wrong (wrong_rows, too_large); else 0.
 *  - binary:  1 correct; else 0.
 *  - tool-rl: 1 correct; 0 wrong or failing (wrong_rows, too_large, sql_error, timeout); -1 no solution
 *             (no_sql, truncated: a turn cut by the token budget) or an unsafe query; then minus 0.05 per
 *             invalid tool call (at most 0.2 in all) and minus 0.1 per skipped evidence rule.
 */
import { T2sError } from "../core/errors.js";
import type { Outcome, RewardFacts, RewardPreset } from "./types.js";

export const REWARD_PRESETS: readonly RewardPreset[] = ["shaped", "binary", "tool-rl"];

const OUTCOMES: readonly Outcome[] = ["correct", "wrong_rows", "sql_error", "timeout", "unsafe", "too_large", "no_sql", "truncated"];

/** True when `s` names a reward preset. */
export function isRewardPreset(s: unknown): s is RewardPreset {
  return typeof s === "string" && (REWARD_PRESETS as readonly string[]).includes(s);
}

/** Returns the reward of an episode under `preset`. */
export function computeReward(preset: RewardPreset, facts: RewardFacts): number {
  const o = facts.outcome;
  if (!OUTCOMES.includes(o)) throw new T2sError("bad_outcome", `unknown outcome '${String(o)}'; expected one of ${OUTCOMES.join(", ")}`);
  switch (preset) {
    case "binary":
      return o === "correct" ? 1 : 0;
    case "shaped":
      return o === "correct" ? 1 : o === "wrong_rows" || o === "too_large" ? 0.1 : 0;
    case "tool-rl": {
      const base = o === "correct" ? 1 : o === "no_sql" || o === "truncated" || o === "unsafe" ? -1 : 0;
      const invalid = Math.max(0, Math.floor(facts.invalidToolCalls ?? 0));
      const skipped = Math.max(0, Math.floor(facts.skippedEvidenceRules ?? 0));
      // integer arithmetic in hundredths keeps 1 - 3 * 0.05 from printing as 0.8500000000000001
      const hundredths = base * 100 - Math.min(invalid * 5, 20) - skipped * 10;
      return hundredths / 100;
    }
    default:
      throw new T2sError("bad_preset", `unknown reward preset '${String(preset)}'; expected one of ${REWARD_PRESETS.join(", ")}`);
  }
}
