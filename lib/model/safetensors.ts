/**
 * The safetensors format: an 8-byte little-endian header length, a JSON header naming each tensor's dtype,
 * shape and byte range, then the raw little-endian data. Everything the kit computes is float32, so F16
 * and BF16 are widened on read; writes can narrow again. Sharded checkpoints
 * (`model.safetensors.index.json`) are read through their weight map.
 */
import { closeSync, existsSync, fstatSync, openSync, readFileSync, readSync } from "node:fs";
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
function halfToFloatTable(): Float32Array {
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

function decode(buf: Buffer, start: number, count: number, dtype: StDtype): Float32Array {
  const out = new Float32Array(count);
  if (dtype === "F32") {
    if ((buf.byteOffset + start) % 4 === 0) out.set(new Float32Array(buf.buffer, buf.byteOffset + start, count));
    else for (let i = 0; i < count; i++) out[i] = buf.readFloatLE(start + 4 * i);
    return out;
  }
  const u16 = new Uint16Array(count);
  if ((buf.byteOffset + start) % 2 === 0) u16.set(new Uint16Array(buf.buffer, buf.byteOffset + start, count));
  else for (let i = 0; i < count; i++) u16[i] = buf.readUInt16LE(start + 2 * i);
  if (dtype === "BF16") {
    const bits = new Uint32Array(out.buffer);
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

interface HeaderEntry {
  dtype: string;
  shape: number[];
  data_offsets: [number, number];
}

/** Returns the parsed header of a safetensors buffer and where its data starts (validated against the size). */
function parseHeader(buf: Buffer, file: string): { entries: Record<string, HeaderEntry>; dataStart: number } {
  if (buf.length < 8) throw bad(file, `file is ${buf.length} bytes, too short for a safetensors header (truncated?)`);
  const n = Number(buf.readBigUInt64LE(0));
  if (8 + n > buf.length) throw bad(file, `header says ${n} bytes but the file has ${buf.length - 8} after the length (truncated?)`);
  let header: Record<string, unknown>;
  try {
    header = JSON.parse(buf.subarray(8, 8 + n).toString("utf8"));
  } catch (e) {
    throw bad(file, `header is not valid JSON (${(e as Error).message})`);
  }
  const entries: Record<string, HeaderEntry> = {};
  for (const [name, v] of Object.entries(header)) {
    if (name === "__metadata__") continue;
    entries[name] = v as HeaderEntry;
  }
  return { entries, dataStart: 8 + n };
}

/**
 * Returns the names and shapes stored in a safetensors file, reading only its header (a checkpoint of
 * tens of GB is not read to list its tensors).
 */
export function readSafetensorsHeader(file: string): Record<string, { dtype: string; shape: number[] }> {
  if (!existsSync(file)) throw new T2sError("missing_file", `${file} does not exist`);
  const fd = openSync(file, "r");
  let buf: Buffer;
  try {
    const size = fstatSync(fd).size;
    buf = Buffer.alloc(Math.min(size, 8));
    readSync(fd, buf, 0, buf.length, 0);
    // a header length the file can hold: read just the header; else let parseHeader name the truncation
    const n = buf.length === 8 ? Number(buf.readBigUInt64LE(0)) : Infinity;
    if (8 + n <= size) {
      buf = Buffer.alloc(8 + n);
      readSync(fd, buf, 0, buf.length, 0);
    }
  } finally {
    closeSync(fd);
  }
  const { entries } = parseHeader(buf, basename(file));
  const out: Record<string, { dtype: string; shape: number[] }> = {};
  for (const [k, e] of Object.entries(entries)) out[k] = { dtype: e.dtype, shape: e.shape };
  return out;
}

/**
 * Returns every tensor of one safetensors file as float32. Throws T2sError("bad_safetensors") naming the
 * file and the tensor when the file is truncated, a dtype is unsupported, or a byte range disagrees with
 * the shape, and T2sError("bad_weights") when a tensor holds a NaN or an infinity (checked once, here).
 */
export function readSafetensors(file: string, only?: Set<string>): Map<string, FloatTensor> {
  if (!existsSync(file)) throw new T2sError("missing_file", `${file} does not exist`);
  const buf = readFileSync(file);
  const { entries, dataStart } = parseHeader(buf, file);
  const dataLen = buf.length - dataStart;
  const out = new Map<string, FloatTensor>();
  for (const [name, e] of Object.entries(entries)) {
    if (only && !only.has(name)) continue;
    const dtype = e.dtype as StDtype;
    if (!(dtype in BYTES)) throw bad(file, `tensor ${name} has dtype ${e.dtype}; only F32, F16 and BF16 are supported`);
    if (!Array.isArray(e.shape) || !Array.isArray(e.data_offsets)) throw bad(file, `tensor ${name} has no shape or data_offsets in the header`);
    const count = e.shape.reduce((a, b) => a * b, 1);
    const [begin, end] = e.data_offsets;
    if (end - begin !== count * BYTES[dtype]) {
      throw bad(file, `tensor ${name}: shape [${e.shape}] of ${dtype} needs ${count * BYTES[dtype]} bytes but its data_offsets span ${end - begin}`);
    }
    if (begin < 0 || end > dataLen) throw bad(file, `tensor ${name} ends at byte ${end} of the data but the file holds only ${dataLen} (truncated?)`);
    const data = decode(buf, dataStart + begin, count, dtype);
    assertFinite(data, name, file);
    out.set(name, { shape: e.shape.slice(), data, dtype });
  }
  return out;
}

/** The tensor -> shard map of a sharded checkpoint's `model.safetensors.index.json`, or null when unsharded. */
export function readWeightMap(dir: string): Record<string, string> | null {
  const index = join(dir, "model.safetensors.index.json");
  if (!existsSync(index)) return null;
  let map: Record<string, string>;
  try {
    map = JSON.parse(readFileSync(index, "utf8")).weight_map;
  } catch (e) {
    throw new T2sError("bad_safetensors", `${index}: not valid JSON (${(e as Error).message})`);
  }
  if (!map || typeof map !== "object") throw new T2sError("bad_safetensors", `${index}: has no weight_map`);
  return map;
}

/**
 * Returns all weights of a checkpoint folder: `model.safetensors`, or the shards listed by
 * `model.safetensors.index.json` (every tensor the index names must be in the shard it names).
 */
export function readCheckpoint(dir: string): Map<string, FloatTensor> {
  const index = join(dir, "model.safetensors.index.json");
  const map = readWeightMap(dir);
  if (map) {
    const byShard = new Map<string, Set<string>>();
    for (const [name, shard] of Object.entries(map)) {
      if (!byShard.has(shard)) byShard.set(shard, new Set());
      byShard.get(shard)!.add(name);
    }
    const out = new Map<string, FloatTensor>();
    for (const [shard, names] of byShard) {
      const file = join(dir, shard);
      if (!existsSync(file)) throw new T2sError("missing_file", `${index} lists shard ${shard}, which is missing from ${dir}`);
      const got = readSafetensors(file, names);
      for (const n of names) {
        const t = got.get(n);
        if (!t) throw new T2sError("bad_safetensors", `${file}: the index says tensor ${n} is here, but the shard does not hold it`);
        out.set(n, t);
      }
    }
    return out;
  }
  const single = join(dir, "model.safetensors");
  if (!existsSync(single)) throw new T2sError("missing_file", `${dir} has neither model.safetensors nor model.safetensors.index.json`);
  return readSafetensors(single);
}

function encode(data: Float32Array, dtype: StDtype): Buffer {
  if (dtype === "F32") return Buffer.from(new Uint8Array(data.buffer, data.byteOffset, data.byteLength).slice());
  const u16 = new Uint16Array(data.length);
  const bits = new Uint32Array(Float32Array.from(data).buffer);
  if (dtype === "BF16") {
    for (let i = 0; i < data.length; i++) {
      const b = bits[i];
      // round to nearest even, as torch does when casting to bfloat16
      u16[i] = ((b + 0x7fff + ((b >>> 16) & 1)) >>> 16) & 0xffff;
      if ((b & 0x7f800000) === 0x7f800000 && b & 0x7fffff) u16[i] = 0x7fc0;
    }
  } else {
    for (let i = 0; i < data.length; i++) u16[i] = floatToHalf(data[i]);
  }
  return Buffer.from(u16.buffer);
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
