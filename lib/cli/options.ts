/**
 * Shared parsing of option values, so every command rejects bad numbers the same way (exit 2, naming the
 * flag) and prints JSON the same way.
 */
import { existsSync, statSync } from "node:fs";
import { join } from "node:path";
import { DIALECTS, type Dialect } from "../db/dialect.js";
import { UsageError } from "../core/errors.js";

/** Parses an integer flag value in [min, max] or throws a UsageError naming the flag. */
export function intOption(flag: string, min = 0, max = Number.MAX_SAFE_INTEGER): (value: string) => number {
  return (value: string) => {
    const n = Number(value);
    if (value.trim() === "" || !Number.isInteger(n) || n < min || n > max) {
      throw new UsageError(`${flag} must be an integer ${max === Number.MAX_SAFE_INTEGER ? `>= ${min}` : `from ${min} to ${max}`}, got '${value}'`);
    }
    return n;
  };
}

/** Bounds of a number flag: at least `min`, above `gt`, at most `max`. */
export interface NumberBounds {
  min?: number;
  gt?: number;
  max?: number;
}

/** Parses a finite number flag value within `bounds` or throws a UsageError naming the flag. */
export function numberOption(flag: string, bounds: NumberBounds = {}): (value: string) => number {
  const want = [bounds.min !== undefined ? `>= ${bounds.min}` : "", bounds.gt !== undefined ? `> ${bounds.gt}` : "", bounds.max !== undefined ? `<= ${bounds.max}` : ""].filter(Boolean).join(" and ");
  return (value: string) => {
    const n = Number(value);
    const ok = value.trim() !== "" && Number.isFinite(n) && (bounds.min === undefined || n >= bounds.min) && (bounds.gt === undefined || n > bounds.gt) && (bounds.max === undefined || n <= bounds.max);
    if (!ok) throw new UsageError(`${flag} must be a number${want ? ` ${want}` : ""}, got '${value}'`);
    return n;
  };
}

/** Returns `value` when it is one of `allowed`, else throws a UsageError naming the flag and the choices. */
export function oneOf<T extends string>(flag: string, value: string, allowed: readonly T[]): T {
  if (!(allowed as readonly string[]).includes(value)) throw new UsageError(`${flag} must be one of ${allowed.join(", ")}, got '${value}'`);
  return value as T;
}

/**
 * Parses a flag naming a file to write: a path that is an existing folder is refused (UsageError naming
 * the flag), before anything is written beside it; `example` names a file that could go in that folder.
 */
export function outFile(flag: string, example: string): (value: string) => string {
  return (value: string) => {
    if (existsSync(value) && statSync(value).isDirectory()) throw new UsageError(`${flag} ${value} is a folder; give the path of the file to write (e.g. ${join(value, example)})`);
    return value;
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
