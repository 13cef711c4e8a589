/**
 * Typed errors of the kit. Every error a user can cause carries a stable `code` and a message that says
 * what to do; the CLI prints `error [code]: message` and exits 1 (2 for usage errors).
 */
export class T2sError extends Error {
  readonly code: string;
  constructor(code: string, message: string) {
    super(message);
    this.name = "T2sError";
    this.code = code;
  }
}

/** An error caused by how a command was called (bad flag, bad value): the CLI exits 2. */
export class UsageError extends T2sError {
  constructor(message: string) {
    super("usage", message);
    this.name = "UsageError";
  }
}

/** True when `e` is a kit error with the given code (or any kit error when no code is given). */
export function isT2sError(e: unknown, code?: string): e is T2sError {
  return e instanceof T2sError && (code === undefined || e.code === code);
}
