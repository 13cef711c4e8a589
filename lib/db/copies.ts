/**
 * Content hashes and private copies of database files. The grader can run on its own read-only copy of
 * each database, named by its hash, so nothing else (a tool call, another run, an edit on disk) can change
 * what it grades against; a copy or a registered original that changed on disk is reported, not used.
 */
import { createHash } from "node:crypto";
import { chmodSync, closeSync, constants, copyFileSync, existsSync, fstatSync, mkdirSync, openSync, readSync, renameSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { basename, join, resolve } from "node:path";
import { Worker } from "node:worker_threads";
import { T2sError } from "../core/errors.js";

/** Bytes read per step when hashing: a file is never read whole (Node refuses files over 2 GiB at once). */
const HASH_CHUNK = 1 << 20;

const cannotRead = (path: string, e: unknown) => new T2sError("no_database", `cannot read ${path}: ${e instanceof Error ? e.message : String(e)}`);

/** Opened without blocking (a FIFO would hold open() until a writer came) and only if it is a regular file. */
const OPEN_FLAGS = constants.O_RDONLY | constants.O_NONBLOCK;

/** The sha256 (lowercase hex) of a regular file's bytes, read in chunks on this thread (any size). */
export function fileSha256(path: string): string {
  const hash = createHash("sha256");
  const buf = Buffer.allocUnsafe(HASH_CHUNK);
  let fd: number;
  try {
    fd = openSync(path, OPEN_FLAGS);
  } catch (e) {
    throw cannotRead(path, e);
  }
  try {
    if (!fstatSync(fd).isFile()) throw new Error("not a regular file");
    for (let pos = 0; ; ) {
      const n = readSync(fd, buf, 0, buf.length, pos);
      if (n === 0) break;
      hash.update(buf.subarray(0, n));
      pos += n;
    }
  } catch (e) {
    throw cannotRead(path, e);
  } finally {
    closeSync(fd);
  }
  return hash.digest("hex");
}

/** The hashing thread's code: fileSha256's loop, answering the digest or the error message. */
const HASH_THREAD = `
const { workerData, parentPort } = require("node:worker_threads");
const { createHash } = require("node:crypto");
const fs = require("node:fs");
try {
  const hash = createHash("sha256");
  const buf = Buffer.allocUnsafe(workerData.chunk);
  const fd = fs.openSync(workerData.path, workerData.flags);
  try {
    if (!fs.fstatSync(fd).isFile()) throw new Error("not a regular file");
    for (let pos = 0; ; ) {
      const n = fs.readSync(fd, buf, 0, buf.length, pos);
      if (n === 0) break;
      hash.update(buf.subarray(0, n));
      pos += n;
    }
  } finally {
    fs.closeSync(fd);
  }
  parentPort.postMessage({ sha: hash.digest("hex") });
} catch (e) {
  parentPort.postMessage({ error: e.message });
}`;

/**
 * The sha256 of a regular file's bytes, streamed in chunks by a worker thread: the event loop keeps answering while
 * a large file is hashed, and there is no size limit. Rejects with T2sError("no_database") when unreadable.
 */
export function fileSha256Async(path: string): Promise<string> {
  return new Promise((done, fail) => {
    const thread = new Worker(HASH_THREAD, { eval: true, workerData: { path, chunk: HASH_CHUNK, flags: OPEN_FLAGS } });
    thread.once("message", (m: { sha?: string; error?: string }) => (m.sha !== undefined ? done(m.sha) : fail(cannotRead(path, new Error(m.error)))));
    thread.once("error", (e) => fail(cannotRead(path, e)));
    thread.once("exit", () => fail(cannotRead(path, new Error("the hashing thread stopped"))));
  });
}

/** Default folder for private copies: one per process under the system temp dir. */
export function defaultCopyDir(): string {
  return join(tmpdir(), `t2s-db-copies-${process.pid}`);
}

/**
 * Copies `dbPath` into `dir` as `<name>-<sha12>.sqlite`, read-only, and checks the copy's hash; an
 * existing copy with the right hash is reused. Returns the copy's path and the content hash.
 */
export function privateCopy(dbPath: string, dir: string = defaultCopyDir()): { path: string; sha256: string } {
  const source = resolve(dbPath);
  if (!existsSync(source) || !statSync(source).isFile()) throw new T2sError("no_database", `no database file at ${source}`);
  const sha256 = fileSha256(source);
  mkdirSync(dir, { recursive: true });
  const stem = basename(source).replace(/\.(sqlite3?|db)$/i, "");
  const target = join(dir, `${stem}-${sha256.slice(0, 12)}.sqlite`);
  if (existsSync(target) && fileSha256(target) === sha256) return { path: target, sha256 };
  const tmp = `${target}.copying-${process.pid}`;
  copyFileSync(source, tmp);
  const copied = fileSha256(tmp);
  if (copied !== sha256) {
    throw new T2sError("db_changed", `${source} changed while it was being copied (sha256 ${sha256.slice(0, 12)} -> ${copied.slice(0, 12)}); stop whatever writes to it and retry`);
  }
  chmodSync(tmp, 0o444);
  renameSync(tmp, target);
  return { path: target, sha256 };
}

/** Throws T2sError("db_changed") when the file at `path` no longer has the content hash `sha256`. */
export function assertUnchanged(path: string, sha256: string): void {
  const now = fileSha256(path);
  if (now !== sha256) {
    throw new T2sError("db_changed", `${path} changed on disk since it was registered (sha256 ${sha256.slice(0, 12)} -> ${now.slice(0, 12)}); rebuild or re-register it and rerun`);
  }
}

interface Registered {
  copy: { path: string; sha256: string };
  signature: string;
  copySignature: string;
}

function signature(path: string): string {
  const st = statSync(path);
  return `${st.ino}:${st.size}:${st.mtimeMs}`;
}

/**
 * Private copies of databases, one per source path, made on first use. Every later lookup checks (by
 * size and mtime, then by hash when those moved) that neither the original nor the copy changed.
 */
export class CopyRegistry {
  private readonly entries = new Map<string, Registered>();
  constructor(private readonly dir: string = defaultCopyDir()) {}

  /** The private copy for `dbPath` (made now if new); throws T2sError("db_changed") if either side changed. */
  get(dbPath: string): { path: string; sha256: string } {
    const source = resolve(dbPath);
    const hit = this.entries.get(source);
    if (!hit) {
      const copy = privateCopy(source, this.dir);
      this.entries.set(source, { copy, signature: signature(source), copySignature: signature(copy.path) });
      return copy;
    }
    if (!existsSync(source)) throw new T2sError("db_changed", `${source} was removed since it was registered; restore it or start a new run`);
    if (signature(source) !== hit.signature) {
      assertUnchanged(source, hit.copy.sha256);
      hit.signature = signature(source);
    }
    if (!existsSync(hit.copy.path)) throw new T2sError("db_changed", `the private copy ${hit.copy.path} of ${source} was removed`);
    if (signature(hit.copy.path) !== hit.copySignature) {
      assertUnchanged(hit.copy.path, hit.copy.sha256);
      hit.copySignature = signature(hit.copy.path);
    }
    return hit.copy;
  }

  /** Every registered source path with its content hash. */
  list(): { source: string; path: string; sha256: string }[] {
    return [...this.entries].map(([source, r]) => ({ source, ...r.copy }));
  }
}
