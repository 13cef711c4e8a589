/** Paths and references of the model parity fixtures (made by scripts/parity/make_fixtures.py). */
import { readFileSync } from "node:fs";
import { join, resolve } from "node:path";

export const fixtureRoot = resolve("test/fixtures/model");
export const ARCH_FIXTURES = ["llama", "llama3rope", "qwen2", "qwen3"] as const;

export function fixtureDir(name: string): string {
  return join(fixtureRoot, name);
}

export interface LogitsReference {
  sequences: { ids: number[]; logits: number[][] }[];
  greedy: { prompt: number[]; new_ids: number[] };
}

export function readReference<T = LogitsReference & { architecture: string }>(name: string): T {
  return JSON.parse(readFileSync(join(fixtureRoot, name, "reference.json"), "utf8")) as T;
}

/** Largest absolute difference between reference rows and computed rows. */
export function maxAbsDiff(ref: number[][], got: ArrayLike<number>[]): number {
  let m = 0;
  ref.forEach((row, i) => row.forEach((v, j) => (m = Math.max(m, Math.abs(v - got[i][j])))));
  return m;
}
