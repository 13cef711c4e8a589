/**
 * The base an adapter was trained on, as the kit records it when it saves an adapter, and the same facts
 * read from a base folder, so every load can tell "this base" from "another base". A LoRA pair of the
 * right shapes placed on another base (a fine-tune of the same shape, say) loads and runs, and serves
 * something nobody trained: shapes alone cannot tell. The record holds three hashes:
 *  - config_sha256: config.json's fields with sorted keys, less those that do not change the model
 *    (transformers_version, _name_or_path, dtype/torch_dtype, use_cache);
 *  - shapes_sha256: every weight's name and shape, sorted by name (whatever the shard layout);
 *  - weights_sha256: the first and last SAMPLE values of every weight, widened to float32 (so a bf16 base
 *    and its exact float32 copy agree), which tells two bases of one shape apart;
 * and the base folder's name, for messages. It is stored as one JSON string under `t2s_base` in
 * adapter_model.safetensors' `__metadata__`, which PEFT, vLLM and the safetensors library ignore, and it
 * travels with the weights it describes. Adapters without one (older ones, PEFT's) load with the shape
 * checks only.
 */
import { createHash } from "node:crypto";
import { basename, join } from "node:path";
import { T2sError } from "../core/errors.js";
import { closeFile, openRegularFile, readAt, readWholeFile, runSync, type Io } from "./adapter-files.js";
import { decode, headerLength, jsonErrorPosition, parseHeaderJson, parseWeightMap, tensorSpan, type SafetensorsHeader } from "./safetensors.js";

/** What an adapter records of its base (see the module comment). */
export interface BaseRecord {
  name: string;
  config_sha256: string;
  shapes_sha256: string;
  weights_sha256: string;
}

/** The `__metadata__` key of adapter_model.safetensors that holds the record. */
export const BASE_RECORD_KEY = "t2s_base";
/** Values sampled from each end of every weight for weights_sha256. */
const SAMPLE = 16;
/** config.json fields that do not change what the model computes. */
const COSMETIC = new Set(["transformers_version", "_name_or_path", "torch_dtype", "dtype", "use_cache"]);
/** The record's hashes and what each covers, in the order messages list them. */
const FIELDS: [keyof BaseRecord, string][] = [["config_sha256", "config.json"], ["shapes_sha256", "weight names and shapes"], ["weights_sha256", "weight values"]];

function canonical(v: unknown): string {
  if (Array.isArray(v)) return `[${v.map(canonical).join(",")}]`;
  if (v && typeof v === "object") return `{${Object.keys(v).sort().map((k) => `${JSON.stringify(k)}:${canonical((v as Record<string, unknown>)[k])}`).join(",")}}`;
  return JSON.stringify(v) ?? "null";
}

const sha256 = (s: string | Buffer) => createHash("sha256").update(s).digest("hex");

/** Reads the header of an opened safetensors file. */
export function* readHeaderOf(f: { fd: number; size: number; shown: string }): Io<SafetensorsHeader> {
  const first8 = yield* readAt(f, 0, Math.min(8, f.size));
  const n = headerLength(first8, f.shown, f.size);
  const json = yield* readAt(f, 8, n);
  if (json.length < n) throw new T2sError("bad_safetensors", `${f.shown}: the file ended inside its header (truncated?)`);
  return parseHeaderJson(json, f.shown, f.size);
}

/** The record of a base folder (config.json and model.safetensors or its shards), read as steps. */
export function* baseRecordSteps(dir: string): Io<BaseRecord> {
  const cfgFile = join(dir, "config.json");
  const cfgBytes = yield* readWholeFile(cfgFile, cfgFile);
  let cfg: unknown;
  try {
    cfg = JSON.parse(cfgBytes.toString("utf8"));
  } catch (e) {
    throw new T2sError("bad_config", `${cfgFile}: not valid JSON${jsonErrorPosition(e)}`);
  }
  if (!cfg || typeof cfg !== "object" || Array.isArray(cfg)) throw new T2sError("bad_config", `${cfgFile}: not a JSON object`);
  const defining = Object.fromEntries(Object.entries(cfg).filter(([k]) => !COSMETIC.has(k)));
  const index = join(dir, "model.safetensors.index.json");
  let files: string[];
  try {
    files = [...new Set(Object.values(parseWeightMap(yield* readWholeFile(index, index), index)))].sort();
  } catch (e) {
    if (!(e instanceof T2sError && e.code === "missing_file")) throw e;
    files = ["model.safetensors"];
  }
  const tensors = new Map<string, { shape: number[]; sample: Buffer }>();
  for (const name of files) {
    const f = yield* openRegularFile(join(dir, name), join(dir, name));
    try {
      const h = yield* readHeaderOf(f);
      for (const key of Object.keys(h.entries).sort()) {
        const span = tensorSpan(h.entries[key], key, f.shown, h.dataLen);
        const bytesPer = (span.end - span.begin) / Math.max(1, span.count);
        const k = Math.min(SAMPLE, span.count);
        const head = yield* readAt(f, h.dataStart + span.begin, k * bytesPer);
        const tail = yield* readAt(f, h.dataStart + span.end - k * bytesPer, k * bytesPer);
        const values = [decode(head, 0, head.length / bytesPer, span.dtype), decode(tail, 0, tail.length / bytesPer, span.dtype)];
        tensors.set(key, { shape: span.shape, sample: Buffer.concat(values.map((v) => Buffer.from(v.buffer, v.byteOffset, v.byteLength))) });
      }
    } finally {
      yield* closeFile(f);
    }
  }
  const names = [...tensors.keys()].sort();
  const weights = createHash("sha256");
  for (const n of names) weights.update(n).update(tensors.get(n)!.sample);
  return {
    name: basename(dir),
    config_sha256: sha256(canonical(defining)),
    shapes_sha256: sha256(names.map((n) => `${n}[${tensors.get(n)!.shape.join(",")}]`).join("\n")),
    weights_sha256: weights.digest("hex"),
  };
}

/** The record of a base folder, read now with blocking calls. */
export function readBaseRecord(dir: string): BaseRecord {
  return runSync(baseRecordSteps(dir));
}

/** The record an adapter's safetensors metadata holds, or null when it holds none (or one not written by the kit). */
export function recordInMetadata(metadata: Record<string, string>): BaseRecord | null {
  const raw = metadata[BASE_RECORD_KEY];
  if (raw === undefined) return null;
  try {
    const r = JSON.parse(raw) as Partial<BaseRecord>;
    if (typeof r.name === "string" && FIELDS.every(([k]) => typeof r[k] === "string")) return { name: r.name, config_sha256: r.config_sha256!, shapes_sha256: r.shapes_sha256!, weights_sha256: r.weights_sha256! };
  } catch {
    // a record that does not parse is no record
  }
  return null;
}

/** The metadata entry that stores a record. */
export function recordMetadata(record: BaseRecord): Record<string, string> {
  return { [BASE_RECORD_KEY]: JSON.stringify(record) };
}

/** What differs between an adapter's recorded base and a base (empty: the same base). */
export function baseDifferences(recorded: BaseRecord, actual: BaseRecord): string[] {
  return FIELDS.filter(([k]) => recorded[k] !== actual[k]).map(([, what]) => what);
}

/** The refusal of an adapter trained on another base, naming what differs and how to load it anyway. */
export function baseMismatchError(file: string, recorded: BaseRecord, actual: BaseRecord, differs: string[]): T2sError {
  return new T2sError(
    "adapter_base_mismatch",
    `${file} was trained on base '${recorded.name}', and this base ('${actual.name}') differs from it in ${differs.join(", ")}: on another base the adapter serves something it was not trained for. Load it on its own base, or pass --allow-base-mismatch (allow_base_mismatch in a training config's adapter) to load it anyway`,
  );
}
