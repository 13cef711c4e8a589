/**
 * Question styles: the same draft framed four ways. casual and formal are full sentences, terse drops the
 * pleasantries, analyst also names the output columns (the only style that does).
 */
import type { SeededRandom } from "../../core/random.js";
import type { Draft } from "./template.js";

export const STYLES = ["casual", "formal", "terse", "analyst"] as const;
export type Style = (typeof STYLES)[number];

/** Frames for a subject that is a noun phrase ("the number of ..."). */
const NOUN_FRAMES: Record<Style, string[]> = {
  casual: [
    "Hey, could you look up {S}? I just need {R}.",
    "I'm trying to figure out {S}. Can you give me {R}?",
    "Can you pull {S} for me? {R!} would be perfect.",
    "Quick question about {S} - show me {R}, thanks!",
    "Wondering about {S}. Mind sharing {R}?",
  ],
  formal: [
    "Please determine {S}. Return {R}.",
    "Report {S}. The result should consist of {R}.",
    "Provide {S}, returning {R}.",
    "Kindly compute {S} and present {R}.",
    "Determine {S}; the expected output is {R}.",
  ],
  terse: ["{S!}. Return {R}.", "{S!}; output {R}.", "{S!} -> {R}.", "Find {S}. {R!}."],
  analyst: [
    "Compute {S}. Output columns: {C} ({R}).",
    "For the dashboard: {S}. Columns {C}; {R}.",
    "Metric needed: {S}. Return columns {C} - {R}.",
    "Pull {S} as columns {C}, {R}.",
  ],
};

/** Frames for a subject that is an indirect question ("how many ...", "which ..."). */
const CLAUSE_FRAMES: Record<Style, string[]> = {
  casual: [
    "Hey, do you know {S}? I just need {R}.",
    "I'm trying to figure out {S}. Can you give me {R}?",
    "Could you check {S}? {R!} would be perfect.",
    "Wondering {S} - mind sharing {R}?",
  ],
  formal: [
    "Please determine {S}. Return {R}.",
    "We need to establish {S}. The result should consist of {R}.",
    "Kindly find out {S}, returning {R}.",
  ],
  terse: ["{S!}? Return {R}.", "{S!}? Output {R}.", "{S!}? {R!}."],
  analyst: [
    "Question: {S}? Output columns: {C} ({R}).",
    "Need to know {S}. Columns {C}; {R}.",
    "Check {S} - return columns {C}, {R}.",
  ],
};

function cap(s: string): string {
  return s.charAt(0).toUpperCase() + s.slice(1);
}

/** The question text of a draft in a style (choices of wording drawn from `rng`). */
export function renderQuestion(style: Style, draft: Draft, rng: SeededRandom): string {
  const subject = rng.pick(draft.subject);
  const returns = rng.pick(draft.returns);
  const frames = /^(how|which|who|what|whether)\b/i.test(subject) ? CLAUSE_FRAMES : NOUN_FRAMES;
  return rng.pick(frames[style])
    .replace("{S!}", cap(subject))
    .replace("{S}", subject)
    .replace("{R!}", cap(returns))
    .replace("{R}", returns)
    .replace("{C}", draft.columns.join(", "));
}
