/**
 * The `kv_cache_dtype` setting (vLLM's name): how the WebGPU step runner stores each slot's keys and values.
 * fp16 and bf16 keep two values per 32-bit word (half the bytes of fp32) and the kernels widen them to
 * float32 as they read, so only the stored values are rounded; fp32 keeps them as computed. auto is fp16
 * where the weights are 16-bit on the device and fp32 where they are float32 (lib/model/engine/runners.ts
 * resolves it): fp16 keeps 3 more mantissa bits than bf16, and keys and values stay far inside its range.
 * The tfjs-ops runner (cpu, wasm, T2S_WEBGPU_RUNNER=0) has a float32 cache only. Kept free of tfjs so the
 * command line can parse the flag without loading it.
 */
import { SHARED_SETTINGS } from "../core/defaults.js";
import { T2sError, UsageError } from "../core/errors.js";
import type { Half } from "../backend/webgpu/half.js";
import type { ModelConfig } from "./config.js";

export const KV_CACHE_DTYPES = SHARED_SETTINGS.kv_cache_dtype.type.options;
/** The setting's values, auto included. */
export type KvCacheDtypeName = (typeof KV_CACHE_DTYPES)[number];
/** What a cache is stored as once auto is resolved. */
export type KvCacheDtype = Exclude<KvCacheDtypeName, "auto">;
export const KV_CACHE_DTYPE_DEFAULT: KvCacheDtypeName = SHARED_SETTINGS.kv_cache_dtype.default;

export const KV_CACHE_DTYPE_HELP = `storage of the sampler's KV cache on the WebGPU step runner: ${KV_CACHE_DTYPES.join(" | ")} (fp16/bf16: half the bytes, math in float32; auto: fp16 with 16-bit weights, else fp32)`;

/** Commander parser of --kv-cache-dtype (a usage error names the choices). */
export function kvCacheDtypeOption(v: string): KvCacheDtypeName {
  const n = v.trim().toLowerCase();
  if (!(KV_CACHE_DTYPES as readonly string[]).includes(n)) throw new UsageError(`--kv-cache-dtype must be one of ${KV_CACHE_DTYPES.join(", ")}, got '${v}'`);
  return n as KvCacheDtypeName;
}

/** The 16-bit format the kernels pack a cache in, or undefined for float32. */
export function kvCacheHalf(d: KvCacheDtype): Half | undefined {
  return d === "fp16" ? "f16" : d === "bf16" ? "bf16" : undefined;
}

/** Bytes of one cached key or value element. */
export function kvCacheElementBytes(d: KvCacheDtype): number {
  return d === "fp32" ? 4 : 2;
}

/** Bytes one token takes in the cache: keys and values of every layer and kv head. */
export function kvCacheBytesPerToken(c: ModelConfig, d: KvCacheDtype): number {
  return c.numLayers * 2 * c.numKvHeads * c.headDim * kvCacheElementBytes(d);
}

/**
 * Why a cache of dtype `d` cannot be used for a model of config `c` on the runner named, or null when it
 * can: a 16-bit cache needs the WebGPU step runner and an even head size (a word holds two neighbours).
 */
export function kvCacheRefusal(d: KvCacheDtypeName, c: ModelConfig, where: { webgpuRunner: boolean; backend: string }): string | null {
  if (d !== "fp16" && d !== "bf16") return null;
  if (!where.webgpuRunner) return `--kv-cache-dtype ${d} runs on the WebGPU step runner (webgpu backend, T2S_WEBGPU_RUNNER unset); this model runs on ${where.backend}${where.backend === "webgpu" ? "'s tfjs-ops runner" : ""}: use auto or fp32`;
  if (c.headDim % 2 !== 0) return `--kv-cache-dtype ${d} needs an even head size (two values per 32-bit word); this model's is ${c.headDim}: use auto or fp32`;
  return null;
}

/** Throws T2sError("kv_cache_dtype_unsupported") with kvCacheRefusal's reason, if any. */
export function assertKvCacheDtype(d: KvCacheDtypeName, c: ModelConfig, where: { webgpuRunner: boolean; backend: string }): void {
  const why = kvCacheRefusal(d, c, where);
  if (why) throw new T2sError("kv_cache_dtype_unsupported", why);
}
