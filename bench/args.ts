/** Flags of the bench scripts (plain `--name value` pairs; the benches are scripts, not commands). */
import { tf } from "../lib/backend/tf.js";

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
export function intFlag(name: string, fallback: number): number {
  const raw = flag(name);
  if (raw === undefined) return fallback;
  const n = Number(raw);
  if (!Number.isInteger(n) || n < 1) throw new Error(`${name} needs a positive integer`);
  return n;
}

/** Sets the tfjs environment flags of `--tf-flags A=v,B=w` (call after the backend is chosen). */
export function applyTfFlags(): void {
  for (const pair of (flag("--tf-flags") ?? "").split(",").filter(Boolean)) {
    const [name, raw] = pair.split("=");
    tf.env().set(name, raw === "true" ? true : raw === "false" ? false : Number.isFinite(Number(raw)) ? Number(raw) : raw);
  }
}
