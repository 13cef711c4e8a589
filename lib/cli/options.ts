/**
 * Shared parsing of option values, so every command rejects bad numbers the same way (exit 2, naming the
 * flag) and prints JSON the same way.
 */
import { DIALECTS, type Dialect } from "../db/dialect.js";
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

/** Collects a repeatable flag (`--param a=1 --param b=2`) into an array. */
export function collect(value: string, previous: string[] = []): string[] {
  return [...previous, value];
}

/** Writes a value as one line of JSON on stdout. */
export function printJson(value: unknown): void {
  process.stdout.write(JSON.stringify(value) + "\n");
}

/** Parses a --dialect value (lib/db/dialect.ts) or throws a UsageError. */
export function dialectOption(value: string): Dialect {
  if (!(DIALECTS as readonly string[]).includes(value)) throw new UsageError(`--dialect must be one of ${DIALECTS.join(", ")}, got '${value}'`);
  return value as Dialect;
}
