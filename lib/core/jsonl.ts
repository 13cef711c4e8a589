/**
 * JSON Lines files: one JSON value per line. Reading reports the file and line of anything malformed;
 * a torn last line (a writer killed mid-line: no trailing newline, invalid JSON) is told apart from a
 * malformed line in the middle, because append-only stores must ignore the former and reject the latter.
 */
import { closeSync, existsSync, fstatSync, fsyncSync, ftruncateSync, mkdirSync, openSync, readFileSync, writeSync } from "node:fs";
import { writeFileAtomic } from "./files.js";
import { dirname } from "node:path";
import { gunzipSync } from "node:zlib";
import { T2sError } from "./errors.js";

export interface BadLine {
  /** 1-based line number. */
  line: number;
  message: string;
  text: string;
}

export interface JsonlContent<T> {
  records: T[];
  /** Malformed lines (only filled when `skipBad` is on; otherwise the first one throws). */
  bad: BadLine[];
  /** The last line was cut off mid-write and ignored. */
  tornTail: boolean;
}

export interface ReadJsonlOptions {
  /** Skip malformed lines and list them in `bad` instead of throwing. */
  skipBad?: boolean;
  /** A missing file reads as empty instead of throwing. */
  allowMissing?: boolean;
}

/** Parses JSONL text; `source` names the file in error messages. */
export function parseJsonl<T = unknown>(text: string, source: string, options: ReadJsonlOptions = {}): JsonlContent<T> {
  const lines = text.split("\n");
  const endsWithNewline = text.endsWith("\n");
  const records: T[] = [];
  const bad: BadLine[] = [];
  let tornTail = false;
  for (let i = 0; i < lines.length; i++) {
    const raw = lines[i];
    if (raw.trim() === "") continue;
    try {
      records.push(JSON.parse(raw) as T);
    } catch (e) {
      const isLast = i === lines.length - 1 && !endsWithNewline;
      if (isLast) {
        tornTail = true;
        continue;
      }
      const message = (e as Error).message;
      if (!options.skipBad) {
        throw new T2sError("bad_jsonl", `${source}:${i + 1}: malformed JSON (${message}): ${raw.slice(0, 120)}`);
      }
      bad.push({ line: i + 1, message, text: raw });
    }
  }
  return { records, bad, tornTail };
}

/**
 * Reads a JSONL file, gzip-compressed when its name ends in .gz (committed rows files are). Throws
 * T2sError("bad_jsonl") naming file and line, or "not_found".
 */
export function readJsonl<T = unknown>(path: string, options: ReadJsonlOptions = {}): JsonlContent<T> {
  if (!existsSync(path)) {
    if (options.allowMissing) return { records: [], bad: [], tornTail: false };
    throw new T2sError("not_found", `no such file: ${path}`);
  }
  let text: string;
  if (path.endsWith(".gz")) {
    try {
      text = gunzipSync(readFileSync(path)).toString("utf8");
    } catch (e) {
      throw new T2sError("bad_jsonl", `${path}: not a readable gzip file (${(e as Error).message})`);
    }
  } else text = readFileSync(path, "utf8");
  return parseJsonl<T>(text, path, options);
}

/**
 * Appends records as JSON lines, whole or not at all, for a file with one writer (the rows store, the
 * train log). A write that fails midway (disk full, file size limit, I/O error) cuts the file back to its
 * length before the append and rethrows the error, so the file holds what it held before and the next
 * append does not glue a record to half of another. `fsync` flushes the lines to the disk before returning.
 * Only a process killed mid-write leaves a torn last line; readers ignore it, and the rows store and the
 * trainer cut it when they open the file.
 */
export function appendJsonl(path: string, records: unknown[], opts: { fsync?: boolean } = {}): void {
  if (records.length === 0) return;
  const bytes = Buffer.from(records.map((r) => JSON.stringify(r)).join("\n") + "\n", "utf8");
  const fd = openSync(path, "a");
  try {
    const start = fstatSync(fd).size;
    try {
      for (let off = 0; off < bytes.length; ) off += writeSync(fd, bytes, off, bytes.length - off);
      if (opts.fsync) fsyncSync(fd);
    } catch (e) {
      try {
        ftruncateSync(fd, start);
      } catch {
        // the torn tail stays; it is the last line, which readers ignore and the next open cuts
      }
      throw e;
    }
  } finally {
    closeSync(fd);
  }
}

/** Formats records as JSONL text. */
export function toJsonl(records: unknown[]): string {
  return records.map((r) => JSON.stringify(r) + "\n").join("");
}

/** Writes records as a JSONL file atomically (a temp file renamed over the target), so a reader never sees half a file. */
export function writeJsonlAtomic(path: string, records: unknown[]): void {
  mkdirSync(dirname(path), { recursive: true });
  writeFileAtomic(path, toJsonl(records));
}
