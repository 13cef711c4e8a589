/**
 * Shared parsing of option values, so every command rejects bad numbers the same way (exit 2, naming the
 * flag) and prints JSON the same way.
 */
import { UsageError } from "../errors.js";

/** Parses a non-negative integer flag value or throws a UsageError naming the flag. */
export function intOption(flag: string, min = 0): (value: string) => number {
  return (value: string) => {
    const n = Number(value);
    if (!Number.isInteger(n) || n < min) throw new UsageError(`${flag} must be an integer >= ${min}, got '${value}'`);
    return n;
  };
}

/** Parses a finite number flag value or throws a UsageError naming the flag. */
export function numberOption(flag: string): (value: string) => number {
  return (value: string) => {
    const n = Number(value);
    if (value.trim() === "" || !Number.isFinite(n)) throw new UsageError(`${flag} must be a number, got '${value}'`);
    return n;
  };
}

/** Returns `value` when it is one of `allowed`, else throws a UsageError naming the flag and the choices. */
export function oneOf<T extends string>(flag: string, value: string, allowed: readonly T[]): T {
  if (!(allowed as readonly string[]).includes(value)) throw new UsageError(`${flag} must be one of ${allowed.join(", ")}, got '${value}'`);
  return value as T;
}

/** Collects a repeatable flag (`--param a=1 --param b=2`) into an array. */
export function collect(value: string, previous: string[] = []): string[] {
  return [...previous, value];
}

/** Writes a value as one line of JSON on stdout. */
export function printJson(value: unknown): void {
  process.stdout.write(JSON.stringify(value) + "\n");
}
