/**
 * The evidence rules of the tool-rl preset (BIRD-style tasks carry "evidence": hints such as
 * "revenue refers to SUM(amount)"). An episode is asked to
 *  1. restate the evidence it needs in one of its first two assistant turns, in lines that start with
 *     "Requirement of external knowledge" (any case), and
 *  2. check it in the answer turn (the last assistant turn), in lines with "Verification of external
 *     knowledge".
 * Each rule skipped costs 0.1 of reward when the evidence penalty is on. A one-turn episode has a single
 * chance for both, so it skips (one rule) only when it has neither block.
 */

/** Returns the evidence pieces of a task: its evidence split on ';', blanks dropped. */
export function evidencePieces(evidence: string | undefined | null): string[] {
  if (typeof evidence !== "string") return [];
  return evidence.split(";").map((s) => s.trim()).filter((s) => s.length > 0);
}

const REQUIREMENT = /requirement of external knowledge/i;
const VERIFICATION = /verification of external knowledge/i;

/** Returns how many evidence rules (0-2) the assistant turns skipped; 0 when the task has no evidence. */
export function skippedEvidenceRules(evidence: string | undefined | null, assistantTurns: string[]): number {
  if (evidencePieces(evidence).length === 0 || assistantTurns.length === 0) return 0;
  const answer = assistantTurns[assistantTurns.length - 1];
  if (assistantTurns.length === 1) return REQUIREMENT.test(answer) || VERIFICATION.test(answer) ? 0 : 1;
  const restated = assistantTurns.slice(0, 2).some((t) => REQUIREMENT.test(t));
  const verified = VERIFICATION.test(answer);
  return (restated ? 0 : 1) + (verified ? 0 : 1);
}
