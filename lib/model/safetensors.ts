/**
 * The safetensors format: an 8-byte little-endian header length, a JSON header naming each tensor's dtype,
 * shape and byte range, then the raw little-endian data. Files are read tensor by tensor at each one's
 * offset (never whole: Node cannot read a file over 2 GiB into one buffer, and a 4 GB shard need not sit in
 * memory beside the model it feeds), so host memory while loading stays near the largest tensor. A tensor
 * comes raw (`RawTensor`, its stored bytes) for callers that keep 16-bit weights 16-bit, or widened to
 * float32; writes can narrow again. Sharded checkpoints (`model.safetensors.index.json`) are read through
 * their weight map.
 */
import { closeSync, constants, existsSync, fstatSync, openSync, readFileSync, readSync, statSync } from "node:fs";
import { writeFileAtomic } from "../core/files.js";
import { basename, join } from "node:path";
import { T2sError } from "../core/errors.js";

export type StDtype = "F32" | "F16" | "BF16";

/** One tensor widened to float32. */
export interface FloatTensor {
  shape: number[];
  data: Float32Array;
  /** The dtype it was stored with. */
  dtype: StDtype;
}

const BYTES: Record<StDtype, number> = { F32: 4, F16: 2, BF16: 2 };

function bad(file: string, what: string): T2sError {
  return new T2sError("bad_safetensors", `${file}: ${what}`);
}

let halfTable: Float32Array | undefined;
/** float16 -> float32 for all 65536 bit patterns (built once; a lookup beats bit twiddling per value). */
export function halfToFloatTable(): Float32Array {
  if (halfTable) return halfTable;
  const t = new Float32Array(65536);
  for (let h = 0; h < 65536; h++) {
    const sign = h & 0x8000 ? -1 : 1;
    const exp = (h >> 10) & 0x1f;
    const frac = h & 0x3ff;
    if (exp === 0) t[h] = sign * Math.pow(2, -14) * (frac / 1024);
    else if (exp === 31) t[h] = frac ? NaN : sign * Infinity;
    else t[h] = sign * Math.pow(2, exp - 15) * (1 + frac / 1024);
  }
  return (halfTable = t);
}

/**
 * Widens `count` stored values of `dtype` starting at byte `start` of `buf` to float32 (no finiteness
 * check), into `into` when given (a view of `count` floats, e.g. a subarray of a larger tensor).
 */
export function decode(buf: Buffer, start: number, count: number, dtype: StDtype, into?: Float32Array): Float32Array {
  const out = into ?? new Float32Array(count);
  if (dtype === "F32") {
    if ((buf.byteOffset + start) % 4 === 0) out.set(new Float32Array(buf.buffer, buf.byteOffset + start, count));
    else for (let i = 0; i < count; i++) out[i] = buf.readFloatLE(start + 4 * i);
    return out;
  }
  const u16 = new Uint16Array(count);
  if ((buf.byteOffset + start) % 2 === 0) u16.set(new Uint16Array(buf.buffer, buf.byteOffset + start, count));
  else for (let i = 0; i < count; i++) u16[i] = buf.readUInt16LE(start + 2 * i);
  if (dtype === "BF16") {
    const bits = new Uint32Array(out.buffer, out.byteOffset, count);
    for (let i = 0; i < count; i++) bits[i] = u16[i] << 16;
  } else {
    const table = halfToFloatTable();
    for (let i = 0; i < count; i++) out[i] = table[u16[i]];
  }
  return out;
}

/**
 * Throws T2sError("bad_weights") naming the tensor when `data` holds a NaN or an infinity: weights like
 * that load and run but every logit they touch is garbage. One branch-free pass over the array (x * 0 is
 * 0 only for a finite x, so the sum stays 0 unless a value is not), about 0.2 s per 125M floats on one
 * core: a fraction of reading a 0.5B model. Only a failing tensor is scanned again, to say where.
 */
export function assertFinite(data: Float32Array, tensor: string, file: string): void {
  let probe = 0;
  for (let i = 0; i < data.length; i++) probe += data[i] * 0;
  if (probe === 0) return;
  let first = -1;
  let count = 0;
  for (let i = 0; i < data.length; i++) {
    if (data[i] - data[i] !== 0) {
      if (first < 0) first = i;
      count++;
    }
  }
  throw new T2sError("bad_weights", `${file}: tensor ${tensor} holds ${count} non-finite value(s) (the first, ${data[first]}, at flat index ${first} of ${data.length}); the file is corrupt or was written by a diverged run`);
}

/** One tensor's entry in a safetensors header. */
export interface HeaderEntry {
  dtype: string;
  shape: number[];
  data_offsets: [number, number];
}

/**
 * The largest header read (100 MB, the limit of the safetensors library itself): a length past it is a
 * file that is not safetensors, and reading it would cost its whole size in memory.
 */
export const MAX_HEADER_BYTES = 100_000_000;

/** The parsed header of a safetensors file: tensor entries, the `__metadata__` strings, where data starts. */
export interface SafetensorsHeader {
  entries: Record<string, HeaderEntry>;
  metadata: Record<string, string>;
  dataStart: number;
  /** Bytes of tensor data after the header. */
  dataLen: number;
}

/**
 * The header length a file's first 8 bytes give, checked against the file's size and MAX_HEADER_BYTES.
 * The message never quotes the value: for a file that is not safetensors it is 8 bytes of its content.
 */
export function headerLength(first8: Buffer, file: string, size: number): number {
  if (size < 8 || first8.length < 8) throw bad(file, `file is ${size} bytes, too short for a safetensors header (truncated?)`);
  const n = first8.readBigUInt64LE(0);
  if (n > BigInt(Math.min(size - 8, MAX_HEADER_BYTES))) {
    throw bad(file, `the header length in its first 8 bytes is larger than the ${size - 8} bytes after them${size - 8 > MAX_HEADER_BYTES ? ` or than ${MAX_HEADER_BYTES}` : ""} (not a safetensors file, or truncated?)`);
  }
  return Number(n);
}

/**
 * Parses the JSON header (the bytes after the 8-byte length) of a file of `size` bytes. A parse error
 * names the byte position only, never the text (the file may not be safetensors at all).
 */
export function parseHeaderJson(json: Buffer, file: string, size: number): SafetensorsHeader {
  let header: unknown;
  try {
    header = JSON.parse(json.toString("utf8"));
  } catch (e) {
    throw bad(file, `header is not valid JSON${jsonErrorPosition(e)}`);
  }
  if (header === null || typeof header !== "object" || Array.isArray(header)) throw bad(file, "header is not a JSON object");
  const entries: Record<string, HeaderEntry> = {};
  let metadata: Record<string, string> = {};
  for (const [name, v] of Object.entries(header as Record<string, unknown>)) {
    if (name === "__metadata__") {
      if (v && typeof v === "object" && !Array.isArray(v)) metadata = Object.fromEntries(Object.entries(v as Record<string, unknown>).filter(([, x]) => typeof x === "string")) as Record<string, string>;
      continue;
    }
    entries[name] = v as HeaderEntry;
  }
  const dataStart = 8 + json.length;
  return { entries, metadata, dataStart, dataLen: size - dataStart };
}

/** " (at byte N)" for a JSON.parse error that says where it failed, else "": never the text itself. */
export function jsonErrorPosition(e: unknown): string {
  const m = /position (\d+)/.exec(String((e as Error)?.message ?? ""));
  return m ? ` (at byte ${m[1]})` : "";
}

/** Where one tensor's bytes lie, checked: a supported dtype, a byte range that fits its shape and the file. */
export interface TensorSpan {
  dtype: StDtype;
  shape: number[];
  count: number;
  /** Offsets of its bytes from the start of the data (after the header). */
  begin: number;
  end: number;
}

/** Checks a header entry against the dtypes read here and the data's length; returns where its bytes are. */
export function tensorSpan(e: HeaderEntry | undefined, name: string, file: string, dataLen: number): TensorSpan {
  if (!e || typeof e !== "object") throw bad(file, `tensor ${name} has no entry in the header`);
  const dtype = e.dtype as StDtype;
  if (!(dtype in BYTES)) throw bad(file, `tensor ${name} has dtype ${String(e.dtype).slice(0, 16)}; only F32, F16 and BF16 are supported`);
  if (!Array.isArray(e.shape) || !Array.isArray(e.data_offsets) || !e.shape.every((d) => Number.isSafeInteger(d) && d >= 0) || !e.data_offsets.every((d) => Number.isSafeInteger(d))) {
    throw bad(file, `tensor ${name} has no valid shape or data_offsets in the header`);
  }
  const count = e.shape.reduce((a, b) => a * b, 1);
  const [begin, end] = e.data_offsets;
  if (end - begin !== count * BYTES[dtype]) {
    throw bad(file, `tensor ${name}: shape [${e.shape}] of ${dtype} needs ${count * BYTES[dtype]} bytes but its data_offsets span ${end - begin}`);
  }
  if (begin < 0 || end > dataLen) throw bad(file, `tensor ${name} ends at byte ${end} of the data but the file holds only ${dataLen} (truncated?)`);
  return { dtype, shape: e.shape.slice(), count, begin, end };
}

/**
 * Returns the names and shapes stored in a safetensors file, reading only its header (a checkpoint of
 * tens of GB is not read to list its tensors).
 */
export function readSafetensorsHeader(file: string): Record<string, { dtype: string; shape: number[] }> {
  const f = SafetensorsFile.open(file);
  f.close();
  const out: Record<string, { dtype: string; shape: number[] }> = {};
  for (const [k, e] of Object.entries(f.entries)) out[k] = { dtype: e.dtype, shape: e.shape };
  return out;
}

/** The `__metadata__` strings of a safetensors file (its header only is read). */
export function readSafetensorsMetadata(file: string): Record<string, string> {
  const f = SafetensorsFile.open(file);
  f.close();
  return f.metadata;
}

/** One tensor as stored: its dtype, shape and little-endian bytes (F32, F16 or BF16). */
export interface RawTensor {
  shape: number[];
  dtype: StDtype;
  bytes: Buffer;
}

/** An open safetensors file: its validated header entries, read one tensor at a time by offset. */
class SafetensorsFile {
  readonly entries: Record<string, HeaderEntry>;
  readonly metadata: Record<string, string>;
  private readonly dataStart: number;
  private readonly dataLen: number;

  private constructor(readonly file: string, private readonly fd: number) {
    const size = fstatSync(fd).size;
    const first8 = Buffer.alloc(Math.min(size, 8));
    readSync(fd, first8, 0, first8.length, 0);
    const json = Buffer.alloc(headerLength(first8, file, size));
    if (json.length) readSync(fd, json, 0, json.length, 8);
    const parsed = parseHeaderJson(json, file, size);
    this.entries = parsed.entries;
    this.metadata = parsed.metadata;
    this.dataStart = parsed.dataStart;
    this.dataLen = parsed.dataLen;
  }

  static open(file: string): SafetensorsFile {
    if (!existsSync(file)) throw new T2sError("missing_file", `${file} does not exist`);
    // a FIFO or a device would block open() or stream forever: only regular files are opened
    if (!statSync(file).isFile()) throw new T2sError("not_regular_file", `${file} is not a regular file (a folder, FIFO, socket or device is never read)`);
    const fd = openSync(file, constants.O_RDONLY | (constants.O_NONBLOCK ?? 0));
    if (!fstatSync(fd).isFile()) {
      closeSync(fd);
      throw new T2sError("not_regular_file", `${file} is not a regular file`);
    }
    try {
      return new SafetensorsFile(file, fd);
    } catch (e) {
      closeSync(fd);
      throw e;
    }
  }

  /** Reads one tensor's bytes (checked against its shape and the file's length). */
  read(name: string): RawTensor {
    const { dtype, shape, begin, end } = tensorSpan(this.entries[name], name, this.file, this.dataLen);
    // its own allocation, so the bytes are aligned for typed-array views; read in pieces under 2 GiB
    const bytes = Buffer.allocUnsafeSlow(end - begin);
    const PIECE = 1 << 30;
    for (let done = 0; done < bytes.length; ) {
      const n = readSync(this.fd, bytes, done, Math.min(PIECE, bytes.length - done), this.dataStart + begin + done);
      if (n <= 0) throw bad(this.file, `tensor ${name}: the file ended while reading it (truncated?)`);
      done += n;
    }
    return { shape, dtype, bytes };
  }

  close(): void {
    closeSync(this.fd);
  }
}

/**
 * Throws T2sError("bad_weights") when a 16-bit tensor holds a NaN or an infinity (exponent bits all ones),
 * checked on the stored bits so tensors kept 16-bit are checked too.
 */
export function assertFinite16(raw: RawTensor, tensor: string, file: string): void {
  const count = raw.shape.reduce((a, b) => a * b, 1);
  const u16 = new Uint16Array(raw.bytes.buffer, raw.bytes.byteOffset, count);
  const mask = raw.dtype === "BF16" ? 0x7f80 : 0x7c00;
  let bad16 = 0;
  for (let i = 0; i < count; i++) bad16 |= (u16[i] & mask) === mask ? 1 : 0;
  if (bad16) assertFinite(decode(raw.bytes, 0, count, raw.dtype), tensor, file);
}

/** Widens a raw tensor to float32, refusing NaN and infinite values (T2sError "bad_weights"). */
export function widenRaw(raw: RawTensor, name: string, file: string): FloatTensor {
  const count = raw.shape.reduce((a, b) => a * b, 1);
  const data = decode(raw.bytes, 0, count, raw.dtype);
  assertFinite(data, name, file);
  return { shape: raw.shape, data, dtype: raw.dtype };
}

/**
 * Calls `visit` with every tensor of one safetensors file (or those in `only`), read one at a time; the
 * bytes handed over are the caller's to keep or drop. Throws T2sError("bad_safetensors") naming the file
 * and the tensor when the file is truncated, a dtype is unsupported, or a byte range disagrees with the shape.
 */
export function forEachSafetensor(file: string, visit: (name: string, raw: RawTensor) => void, only?: Set<string> | ((name: string) => boolean)): void {
  const f = SafetensorsFile.open(file);
  const keep = typeof only === "function" ? only : only ? (n: string) => only.has(n) : () => true;
  try {
    for (const name of Object.keys(f.entries)) if (keep(name)) visit(name, f.read(name));
  } finally {
    f.close();
  }
}

/**
 * Returns every tensor of one safetensors file as float32. Throws T2sError("bad_safetensors") naming the
 * file and the tensor when the file is truncated, a dtype is unsupported, or a byte range disagrees with
 * the shape, and T2sError("bad_weights") when a tensor holds a NaN or an infinity (checked once, here).
 */
export function readSafetensors(file: string, only?: Set<string>): Map<string, FloatTensor> {
  const out = new Map<string, FloatTensor>();
  forEachSafetensor(file, (name, raw) => out.set(name, widenRaw(raw, name, file)), only);
  return out;
}

/** The tensor -> shard map of a sharded checkpoint's `model.safetensors.index.json`, or null when unsharded. */
export function readWeightMap(dir: string): Record<string, string> | null {
  const index = join(dir, "model.safetensors.index.json");
  if (!existsSync(index)) return null;
  if (!statSync(index).isFile()) throw new T2sError("not_regular_file", `${index} is not a regular file`);
  return parseWeightMap(readFileSync(index), index);
}

/** The weight_map of an index file's bytes (a parse error names the byte position, never the text). */
export function parseWeightMap(bytes: Buffer, index: string): Record<string, string> {
  let map: unknown;
  try {
    map = JSON.parse(bytes.toString("utf8")).weight_map;
  } catch (e) {
    throw new T2sError("bad_safetensors", `${index}: not valid JSON${jsonErrorPosition(e)}`);
  }
  if (!map || typeof map !== "object" || Array.isArray(map) || !Object.values(map).every((v) => typeof v === "string")) throw new T2sError("bad_safetensors", `${index}: has no weight_map of tensor names to shard files`);
  return map as Record<string, string>;
}

/**
 * Calls `visit` with every tensor of a checkpoint folder, one at a time: `model.safetensors`, or the shards
 * listed by `model.safetensors.index.json` (every tensor the index names must be in the shard it names).
 * Tensors `wanted` refuses are not read at all. Returns the number of files read.
 */
export function forEachCheckpointTensor(dir: string, visit: (name: string, raw: RawTensor, file: string) => void, wanted: (name: string) => boolean = () => true): number {
  const index = join(dir, "model.safetensors.index.json");
  const map = readWeightMap(dir);
  if (!map) {
    const single = join(dir, "model.safetensors");
    if (!existsSync(single)) throw new T2sError("missing_file", `${dir} has neither model.safetensors nor model.safetensors.index.json`);
    forEachSafetensor(single, (name, raw) => visit(name, raw, single), wanted);
    return 1;
  }
  const byShard = new Map<string, Set<string>>();
  for (const [name, shard] of Object.entries(map)) {
    if (!byShard.has(shard)) byShard.set(shard, new Set());
    byShard.get(shard)!.add(name);
  }
  for (const [shard, names] of byShard) {
    const file = join(dir, shard);
    if (!existsSync(file)) throw new T2sError("missing_file", `${index} lists shard ${shard}, which is missing from ${dir}`);
    const seen = new Set<string>();
    forEachSafetensor(file, (name, raw) => {
      seen.add(name);
      visit(name, raw, file);
    }, (n) => names.has(n) && wanted(n));
    for (const n of names) if (!seen.has(n) && wanted(n)) throw new T2sError("bad_safetensors", `${file}: the index says tensor ${n} is here, but the shard does not hold it`);
  }
  return byShard.size;
}

/** Returns all weights of a checkpoint folder as float32 (see forEachCheckpointTensor). */
export function readCheckpoint(dir: string): Map<string, FloatTensor> {
  const out = new Map<string, FloatTensor>();
  forEachCheckpointTensor(dir, (name, raw, file) => out.set(name, widenRaw(raw, name, file)));
  return out;
}

function encode(data: Float32Array, dtype: StDtype): Buffer {
  if (dtype === "F32") return Buffer.from(new Uint8Array(data.buffer, data.byteOffset, data.byteLength).slice());
  if (dtype === "BF16") return Buffer.from(toBf16Bits(data).buffer);
  const u16 = new Uint16Array(data.length);
  for (let i = 0; i < data.length; i++) u16[i] = floatToHalf(data[i]);
  return Buffer.from(u16.buffer);
}

/** Rounds float32 values to bfloat16 bit patterns, to nearest even (as torch casts); NaN stays NaN. */
export function toBf16Bits(data: Float32Array): Uint16Array {
  const bits = new Uint32Array(data.buffer, data.byteOffset, data.length);
  const out = new Uint16Array(data.length);
  for (let i = 0; i < data.length; i++) {
    const b = bits[i];
    out[i] = (b & 0x7f800000) === 0x7f800000 && b & 0x7fffff ? 0x7fc0 : ((b + 0x7fff + ((b >>> 16) & 1)) >>> 16) & 0xffff;
  }
  return out;
}

function floatToHalf(v: number): number {
  if (Number.isNaN(v)) return 0x7e00;
  const sign = v < 0 || Object.is(v, -0) ? 0x8000 : 0;
  const a = Math.abs(v);
  if (a >= 65520) return sign | 0x7c00;
  if (a < Math.pow(2, -24) / 2) return sign;
  if (a < Math.pow(2, -14)) return sign | Math.round(a / Math.pow(2, -24));
  let exp = Math.floor(Math.log2(a));
  let frac = Math.round((a / Math.pow(2, exp) - 1) * 1024);
  if (frac === 1024) {
    frac = 0;
    exp += 1;
  }
  return sign | ((exp + 15) << 10) | frac;
}

/**
 * Writes tensors as one safetensors file (sorted names, 8-byte aligned data), narrowing to `dtype`;
 * written to a temporary name first so an interrupted write never leaves a torn file behind.
 */
export function writeSafetensors(file: string, tensors: Map<string, { shape: number[]; data: Float32Array }>, opts: { dtype?: StDtype; metadata?: Record<string, string> } = {}): void {
  const dtype = opts.dtype ?? "F32";
  const names = [...tensors.keys()].sort();
  const header: Record<string, unknown> = { __metadata__: { format: "pt", ...(opts.metadata ?? {}) } };
  const chunks: Buffer[] = [];
  let offset = 0;
  for (const name of names) {
    const t = tensors.get(name)!;
    const count = t.shape.reduce((a, b) => a * b, 1);
    if (count !== t.data.length) throw new T2sError("bad_tensor", `tensor ${name}: shape [${t.shape}] holds ${count} values but ${t.data.length} were given`);
    const bytes = encode(t.data, dtype);
    header[name] = { dtype, shape: t.shape, data_offsets: [offset, offset + bytes.length] };
    chunks.push(bytes);
    offset += bytes.length;
  }
  let json = JSON.stringify(header);
  while ((8 + Buffer.byteLength(json)) % 8 !== 0) json += " ";
  const len = Buffer.alloc(8);
  len.writeBigUInt64LE(BigInt(Buffer.byteLength(json)));
  writeFileAtomic(file, Buffer.concat([len, Buffer.from(json, "utf8"), ...chunks]));
}
