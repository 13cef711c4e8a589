/**
 * What a database is at one moment, for whatever remembers results by database: the file's signature (the
 * main file's device, inode, size and mtime, and those of its -wal file), whether it is live (committed
 * pages sit in a non-empty -wal file, so the main file's bytes alone do not define its content, and a writer
 * may be adding more), and a content hash over every byte that defines it (the main file, and the -wal file
 * when it holds anything). Hashes read the files in chunks (no file is read whole, no size limit); past a few
 * MiB they stream in a worker thread, so no large file blocks the event loop.
 */
import { createHash } from "node:crypto";
import { statSync } from "node:fs";
import { resolve } from "node:path";
import { T2sError } from "../core/errors.js";
import { fileSha256, fileSha256Async } from "./copies.js";

export interface DatabaseState {
  /** Absolute path of the main file. */
  path: string;
  /** Device, inode, size and mtime of the main file and of its -wal file ("-" when there is none). */
  signature: string;
  /** A -wal file holds committed pages (or pages being committed): the content is main + -wal, and may be moving. */
  live: boolean;
  /** Bytes of the main file and the -wal file together. */
  bytes: number;
}

/** Content up to this size is hashed on the calling thread (a few ms); larger content in a worker thread, whose start costs more than that. */
const HASH_INLINE_BYTES = 4 * 1024 * 1024;

/** The -wal file's part of a signature, and whether it holds anything. */
function walPart(path: string): { sig: string; size: number } {
  try {
    const w = statSync(`${path}-wal`);
    return { sig: `${w.ino}:${w.size}:${w.mtimeMs}`, size: w.size };
  } catch {
    return { sig: "-", size: 0 };
  }
}

/**
 * The state of the database at `dbPath` now (two stat calls). Throws T2sError("no_database") when there is
 * no regular file there.
 */
export function databaseState(dbPath: string): DatabaseState {
  const path = resolve(dbPath);
  let main: string;
  let size: number;
  try {
    const st = statSync(path);
    if (!st.isFile()) throw new Error("not a file");
    main = `${st.dev}:${st.ino}:${st.size}:${st.mtimeMs}`;
    size = st.size;
  } catch (e) {
    throw new T2sError("no_database", `no database file at ${path} (${(e as Error).message})`);
  }
  const wal = walPart(path);
  return { path, signature: `${main}|${wal.sig}`, live: wal.size > 0, bytes: size + wal.size };
}

/** True when the database's files are as they were in `state` (nothing written, replaced or removed since). */
export function unchangedSince(state: DatabaseState): boolean {
  try {
    return databaseState(state.path).signature === state.signature;
  } catch {
    return false;
  }
}

/** Content hashes by path, valid while the signature they were taken at holds; pending ones are shared. */
const memo = new Map<string, { signature: string; sha: Promise<string> }>();

/** The main file's hash, or when the content has a -wal part, the sha256 of both hashes (one hex digest either way). */
function combine(main: string, wal: string | null): string {
  return wal === null ? main : createHash("sha256").update(`${main}\u0000wal\u0000${wal}`).digest("hex");
}

/**
 * The content hash of a database: the sha256 of its main file, and for a live one also of its -wal file
 * (every byte that defines the content), remembered per path until the signature changes. Streams both
 * files off the event loop. A file that changes while it is hashed gives a hash that is not kept.
 */
export function databaseHash(state: DatabaseState): Promise<string> {
  const hit = memo.get(state.path);
  if (hit && hit.signature === state.signature) return hit.sha;
  const sha = state.bytes <= HASH_INLINE_BYTES
    ? new Promise<string>((resolve) => resolve(databaseHashSync(state)))
    : (async () => {
        const main = await fileSha256Async(state.path);
        const wal = state.live ? await fileSha256Async(`${state.path}-wal`) : null;
        return combine(main, wal);
      })();
  memo.set(state.path, { signature: state.signature, sha });
  const forget = () => {
    if (memo.get(state.path)?.sha === sha) memo.delete(state.path);
  };
  sha.then(() => {
    if (!unchangedSince(state)) forget();
  }, forget);
  return sha;
}

/** databaseHash for callers that cannot wait (reads on this thread, in chunks: no size limit). */
export function databaseHashSync(state: DatabaseState): string {
  return combine(fileSha256(state.path), state.live ? fileSha256(`${state.path}-wal`) : null);
}
