/** Paths and references of the model parity fixtures (made by scripts/parity/make_fixtures.py). */
import { copyFileSync, readdirSync, readFileSync, statSync } from "node:fs";
import { join, resolve } from "node:path";
import { readCheckpoint } from "../../lib/model/safetensors.js";
import { scratchDir } from "../helpers.js";

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

/**
 * A temporary copy of a fixture's folder (config and tokenizer files kept) whose weights `write` writes
 * anew from the fixture's tensors: another dtype, another shard layout. The caller removes the folder.
 */
export function copyFixture(name: string, write: (dir: string, tensors: Map<string, { shape: number[]; data: Float32Array }>) => void): string {
  const src = fixtureDir(name);
  const dir = scratchDir(`t2s-weights-${name}-`);
  for (const f of readdirSync(src)) if (!f.endsWith(".safetensors") && !f.endsWith(".index.json") && statSync(join(src, f)).isFile()) copyFileSync(join(src, f), join(dir, f));
  const tensors = new Map([...readCheckpoint(src)].map(([k, t]) => [k, { shape: t.shape, data: t.data }]));
  write(dir, tensors);
  return dir;
}
