/**
 * Opening the files of an adapter folder (and of the base it is checked against) the one way every adapter
 * load does: `t2s serve` at start and at runtime, the tfjs policy, `t2s logits`/`generate`, a training
 * run's init and `t2s adapter check`. A file is resolved and must be a regular file (a folder, FIFO, socket
 * or device is never opened, so nothing blocks in open() or streams forever); with roots it must resolve
 * inside one of them. It is opened without following a last symlink and checked again on the open
 * descriptor (same inode, still regular, and on Linux the kernel's own path of the descriptor inside the
 * roots), so the file checked is the file read. Sizes are capped before a byte is read. Messages name the
 * file as it sits in its folder, never where it points and never its content.
 *
 * The steps are written once, as generators of I/O requests (`Io<T>`); `runSync` performs them with
 * blocking calls (command line, training), `runAsync` on libuv's thread pool with a turn of the event loop
 * at each `pause`, so a server keeps answering while an adapter loads.
 */
import { close, closeSync, constants, fstat, fstatSync, open, openSync, read, readlinkSync, readSync, realpathSync, statSync, type Stats } from "node:fs";
import { readlink, realpath, stat } from "node:fs/promises";
import { isAbsolute, relative } from "node:path";
import { promisify } from "node:util";
import { T2sError } from "../core/errors.js";

/** One I/O request of a loading step. */
export type IoRequest =
  | { op: "realpath"; path: string }
  | { op: "stat"; path: string }
  | { op: "open"; path: string }
  | { op: "fstat"; fd: number }
  | { op: "fdpath"; fd: number }
  | { op: "read"; fd: number; position: number; length: number }
  | { op: "close"; fd: number }
  | { op: "pause" };

/** Steps that ask for I/O and return a T; run them with runSync or runAsync. */
export type Io<T> = Generator<IoRequest, T, unknown>;

// O_NONBLOCK: opening a FIFO that slipped past the checks returns at once instead of waiting for a writer
const OPEN_FLAGS = constants.O_RDONLY | (constants.O_NONBLOCK ?? 0) | (constants.O_NOFOLLOW ?? 0);
/** Bytes per read call: under Node's 2 GiB limit on one read. */
const READ_PIECE = 1 << 30;

function syncOp(r: IoRequest): unknown {
  switch (r.op) {
    case "realpath": return realpathSync(r.path);
    case "stat": return statSync(r.path);
    case "open": return openSync(r.path, OPEN_FLAGS);
    case "fstat": return fstatSync(r.fd);
    case "fdpath": try { return readlinkSync(`/proc/self/fd/${r.fd}`); } catch { return null; }
    case "read": {
      const buf = Buffer.allocUnsafeSlow(r.length);
      let done = 0;
      while (done < r.length) {
        const n = readSync(r.fd, buf, done, Math.min(READ_PIECE, r.length - done), r.position + done);
        if (n <= 0) break;
        done += n;
      }
      return done === r.length ? buf : buf.subarray(0, done);
    }
    case "close": return closeSync(r.fd);
    case "pause": return undefined;
  }
}

const openAsync = promisify(open);
const fstatAsync = promisify(fstat);
const closeAsync = promisify(close);
const readAsync = promisify(read);

async function asyncOp(r: IoRequest): Promise<unknown> {
  switch (r.op) {
    case "realpath": return realpath(r.path);
    case "stat": return stat(r.path);
    case "open": return openAsync(r.path, OPEN_FLAGS);
    case "fstat": return fstatAsync(r.fd);
    case "fdpath": return readlink(`/proc/self/fd/${r.fd}`).catch(() => null);
    case "read": {
      const buf = Buffer.allocUnsafeSlow(r.length);
      let done = 0;
      while (done < r.length) {
        const { bytesRead } = await readAsync(r.fd, buf, done, Math.min(READ_PIECE, r.length - done), r.position + done);
        if (bytesRead <= 0) break;
        done += bytesRead;
      }
      return done === r.length ? buf : buf.subarray(0, done);
    }
    case "close": return closeAsync(r.fd);
    case "pause": return new Promise<void>((resolve) => setImmediate(resolve));
  }
}

/** Performs the steps with blocking calls; returns what they return (their errors are thrown). */
export function runSync<T>(steps: Io<T>): T {
  let next = steps.next();
  while (!next.done) {
    let value: unknown;
    try {
      value = syncOp(next.value as IoRequest); // TypeScript 5.0 (tslab) does not narrow the result here
    } catch (e) {
      next = steps.throw(e);
      continue;
    }
    next = steps.next(value);
  }
  return next.value as T;
}

/** Performs the steps off the event loop (thread-pool I/O, a turn of the loop at each pause). */
export async function runAsync<T>(steps: Io<T>): Promise<T> {
  let next = steps.next();
  while (!next.done) {
    let value: unknown;
    try {
      value = await asyncOp(next.value as IoRequest);
    } catch (e) {
      next = steps.throw(e);
      continue;
    }
    next = steps.next(value);
  }
  return next.value as T;
}

/** Yields to the event loop when run asynchronously (nothing when run synchronously). */
export function* pause(): Io<void> {
  yield { op: "pause" };
}

/** The real path of `path` (symlinks resolved); throws the fs error (ENOENT ...) as it comes. */
export function* realPath(path: string): Io<string> {
  return (yield { op: "realpath", path }) as string;
}

/** stat(2) of a path (symlinks followed). */
export function* statPath(path: string): Io<Stats> {
  return (yield { op: "stat", path }) as Stats;
}

/** Whether real path `p` is `root` or lies under it (both real paths). */
export function isInside(p: string, root: string): boolean {
  const rel = relative(root, p);
  return rel === "" || (!rel.startsWith("..") && !isAbsolute(rel));
}

/** How a file must be to be read. */
export interface FileRules {
  /** Real paths of the folders the file must resolve under; none or empty: anywhere. */
  roots?: readonly string[];
  /** Largest size read, and the setting that raises it (for the message). */
  maxBytes?: number;
  limitName?: string;
}

/** A file opened by openRegularFile: its descriptor, its size at open, and its name for messages. */
export interface OpenedFile {
  fd: number;
  size: number;
  shown: string;
}

const refused = (code: string, msg: string) => new T2sError(code, msg);

/**
 * Opens `path` for reading if it is a regular file within `rules` (see the module comment); `shown` is how
 * messages name it. Throws T2sError missing_file, not_regular_file, outside_roots or file_too_large.
 */
export function* openRegularFile(path: string, shown: string, rules: FileRules = {}): Io<OpenedFile> {
  const roots = rules.roots ?? [];
  let real: string;
  try {
    real = yield* realPath(path);
  } catch {
    // a dangling symlink lands here too: its target is not named
    throw refused("missing_file", `${shown} does not exist`);
  }
  if (roots.length && !roots.some((r) => isInside(real, r))) throw outsideRoots(shown);
  const st = yield* statPath(real);
  if (!st.isFile()) throw notRegular(shown);
  if (rules.maxBytes !== undefined && st.size > rules.maxBytes) throw tooLarge(shown, st.size, rules);
  let fd: number;
  try {
    fd = (yield { op: "open", path: real }) as number;
  } catch {
    // replaced between the check and the open (by a symlink, which O_NOFOLLOW refuses, or removed)
    throw refused("file_changed", `${shown} changed while it was being opened; try again`);
  }
  try {
    const fst = (yield { op: "fstat", fd }) as Stats;
    if (!fst.isFile()) throw notRegular(shown);
    if (fst.ino !== st.ino || fst.dev !== st.dev) throw refused("file_changed", `${shown} changed while it was being opened; try again`);
    if (rules.maxBytes !== undefined && fst.size > rules.maxBytes) throw tooLarge(shown, fst.size, rules);
    if (roots.length) {
      // a folder above the file swapped for a symlink after realpath: the kernel knows what was opened
      const opened = (yield { op: "fdpath", fd }) as string | null;
      if (opened !== null && !roots.some((r) => isInside(opened, r))) throw outsideRoots(shown);
    }
    return { fd, size: fst.size, shown };
  } catch (e) {
    yield { op: "close", fd };
    throw e;
  }
}

function outsideRoots(shown: string): T2sError {
  return refused("outside_roots", `${shown} resolves outside the server's adapter folders (--lora-root); every file of an adapter must lie inside them`);
}

function notRegular(shown: string): T2sError {
  return refused("not_regular_file", `${shown} is not a regular file (a folder, FIFO, socket or device is never read)`);
}

function tooLarge(shown: string, size: number, rules: FileRules): T2sError {
  return refused("file_too_large", `${shown} is ${size} bytes, over the limit of ${rules.maxBytes}${rules.limitName ? ` (${rules.limitName} raises it)` : ""}`);
}

/** Reads `length` bytes at `position`; a file that ends early gives fewer. */
export function* readAt(f: OpenedFile, position: number, length: number): Io<Buffer> {
  return (yield { op: "read", fd: f.fd, position, length }) as Buffer;
}

/** Closes a file opened by openRegularFile. */
export function* closeFile(f: OpenedFile): Io<void> {
  yield { op: "close", fd: f.fd };
}

/** The whole of a small regular file (opened under `rules`, at most its size at open). */
export function* readWholeFile(path: string, shown: string, rules: FileRules = {}): Io<Buffer> {
  const f = yield* openRegularFile(path, shown, rules);
  try {
    return yield* readAt(f, 0, f.size);
  } finally {
    yield* closeFile(f);
  }
}
