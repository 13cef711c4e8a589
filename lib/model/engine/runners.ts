/** Picks the step runner for a model's backend. */
import type { CausalLM } from "../model.js";
import type { StepRunner } from "./runner.js";
import { TfjsRunner } from "./tfjs-runner.js";

/** A runner holding `slots` sequences of `model` with the named unmerged adapter applied. */
export async function createRunner(model: CausalLM, opts: { adapter: string | null; slots: number }): Promise<StepRunner> {
  return new TfjsRunner(model, opts.slots, opts.adapter);
}
