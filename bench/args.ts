/** Flags of the bench scripts (plain `--name value` pairs; the benches are scripts, not commands). */

/** The value after `--name`, or undefined when the flag is absent. */
export function flag(name: string): string | undefined {
  const i = process.argv.indexOf(name);
  return i >= 0 ? process.argv[i + 1] : undefined;
}

/** A positive integer flag, or `fallback` when absent; anything else is an error naming the flag. */
export function intFlag(name: string, fallback: number): number {
  const raw = flag(name);
  if (raw === undefined) return fallback;
  const n = Number(raw);
  if (!Number.isInteger(n) || n < 1) throw new Error(`${name} needs a positive integer`);
  return n;
}
