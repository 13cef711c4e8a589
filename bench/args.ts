/** Flags of the bench scripts (plain `--name value` pairs; the benches are scripts, not commands). */
import { tf } from "../lib/backend/tf.js";
import type { ModelConfig } from "../lib/model/config.js";
import { tinyConfig } from "../lib/model/random-model.js";
import { shapeConfig } from "../lib/model/shapes.js";
import { weightsDtypeOption, type WeightsDtype } from "../lib/model/weights-dtype.js";

/** Prints rows as a table with padded columns under a header and a rule, as every bench does. */
export function printTable(head: string[], rows: string[][]): void {
  const widths = head.map((h, i) => Math.max(h.length, ...rows.map((r) => r[i].length)));
  const line = (r: string[]) => r.map((c, i) => c.padEnd(widths[i])).join("  ");
  process.stdout.write(line(head) + "\n" + widths.map((w) => "-".repeat(w)).join("  ") + "\n" + rows.map(line).join("\n") + "\n");
}

/** The value after `--name`, or undefined when the flag is absent. */
export function flag(name: string): string | undefined {
  const i = process.argv.indexOf(name);
  return i >= 0 ? process.argv[i + 1] : undefined;
}

/** A positive integer flag, or `fallback` when absent; anything else is an error naming the flag. */
export function intFlag(name: string, fallback: number, min = 1): number {
  const raw = flag(name);
  if (raw === undefined) return fallback;
  const n = Number(raw);
  if (!Number.isInteger(n) || n < min) throw new Error(`${name} needs ${min === 1 ? "a positive integer" : `an integer >= ${min}`}`);
  return n;
}

/** Sets the tfjs environment flags of `--tf-flags A=v,B=w` (call after the backend is chosen). */
export function applyTfFlags(): void {
  for (const pair of (flag("--tf-flags") ?? "").split(",").filter(Boolean)) {
    const [name, raw] = pair.split("=");
    tf.env().set(name, raw === "true" ? true : raw === "false" ? false : Number.isFinite(Number(raw)) ? Number(raw) : raw);
  }
}

/**
 * The model shape a bench runs: `--shape NAME` (lib/model/shapes.ts: qwen2.5-0.5b ... qwen2.5-7b,
 * llama3.2-1b/3b, qwen3-4b) with `--vocab N`, `--qwen05b` (= --shape qwen2.5-0.5b), else the tiny one.
 * `big` says whether a real shape was asked for (benches pick their larger defaults then).
 */
export function benchShape(): { config: ModelConfig; big: boolean; name: string } {
  const vocab = flag("--vocab") !== undefined ? Number(flag("--vocab")) : undefined;
  const name = flag("--shape") ?? (process.argv.includes("--qwen05b") ? "qwen2.5-0.5b" : null);
  if (!name) return { config: vocab ? tinyConfig({ vocabSize: vocab }) : tinyConfig(), big: false, name: "tiny llama" };
  return { config: shapeConfig(name, vocab), big: true, name };
}

/** `--weights-dtype` of a random model's matrices (fp32 unless given). */
export function benchWeightsDtype(): WeightsDtype {
  const v = flag("--weights-dtype");
  return v === undefined ? "fp32" : weightsDtypeOption(v);
}
