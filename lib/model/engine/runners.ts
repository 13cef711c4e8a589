/**
 * Picks the step runner for a model's backend: on WebGPU the device runner of lib/model/engine/webgpu-runner.ts (cache in GPU
 * buffers, sampling on the device), everywhere else the tfjs-ops runner. `T2S_WEBGPU_RUNNER=0` keeps WebGPU
 * on the tfjs-ops runner (for comparisons; it reads every layer's projections back, so it is slow there).
 *
 * Building a device runner compiles its kernels and allocates its caches (about a second for a 0.5B model),
 * so an engine that closes hands it back and the next engine of the same model and adapter reuses it; the
 * model frees its idle runners when it is disposed. CPU runners are cheap and hold prefixes computed from
 * the weights of their time, so each engine gets a fresh one.
 *
 * It also resolves the model's `kv_cache_dtype` for the runner it picks (lib/model/kv-cache-dtype.ts):
 * auto is fp16 on the WebGPU runner when the model's matrices are 16-bit on the device, else fp32.
 */
import type { CausalLM } from "../model.js";
import type { StepRunner } from "./runner.js";
import { TfjsRunner } from "./tfjs-runner.js";
import { T2sError } from "../../core/errors.js";
import { isPacked } from "../packed.js";
import { assertKvCacheDtype, KV_CACHE_DTYPE_DEFAULT, kvCacheRefusal, type KvCacheDtype, type KvCacheDtypeName } from "../kv-cache-dtype.js";

/** A runner lent to one engine; release() hands it back (or frees it). */
export interface RunnerLease {
  runner: StepRunner;
  release(): void;
}

interface IdleRunner {
  adapter: string | null;
  /** The model's quantization when it was built (its int8 weights are a copy of that time's). */
  quantization: CausalLM["quantization"];
  /** Its cache's storage. */
  kvCacheDtype: KvCacheDtype;
  /** Its prefix cache's size (buffers sized once). */
  prefixCacheTokens: number;
  runner: StepRunner;
}

/** Whether `model` samples on the WebGPU step runner (else the tfjs-ops one). */
export function webgpuRunnerFor(model: CausalLM): boolean {
  return model.backend === "webgpu" && process.env.T2S_WEBGPU_RUNNER !== "0";
}

/**
 * The storage of the caches `model`'s runners get: its kv_cache_dtype, with auto as fp16 where the WebGPU
 * runner serves weights stored 16-bit (their rounding already exceeds the cache's) and fp32 elsewhere.
 * Throws T2sError("kv_cache_dtype_unsupported") for a 16-bit choice the runner cannot hold.
 */
export function resolveKvCacheDtype(model: CausalLM): KvCacheDtype {
  const where = { webgpuRunner: webgpuRunnerFor(model), backend: model.backend };
  const d = model.kvCacheDtype;
  assertKvCacheDtype(d, model.config, where);
  if (d !== "auto") return d;
  const packed = model.weights.layers.some((l) => isPacked(l.q.weight));
  return packed && kvCacheRefusal("fp16", model.config, where) === null ? "fp16" : "fp32";
}

/**
 * Makes `model`'s runners store their caches as `name` (undefined: the default, auto); a 16-bit choice the
 * model's runner cannot hold is refused here, before any work, with the reason.
 */
export function applyKvCacheDtype(model: CausalLM, name: KvCacheDtypeName | undefined): void {
  const before = model.kvCacheDtype;
  model.kvCacheDtype = name ?? KV_CACHE_DTYPE_DEFAULT;
  try {
    resolveKvCacheDtype(model);
  } catch (e) {
    model.kvCacheDtype = before;
    throw e;
  }
}

const idle = new WeakMap<CausalLM, IdleRunner[]>();

/** Frees the idle device runners of `model` (their caches and buffers), e.g. before a training update. */
export function freeIdleRunners(model: CausalLM): number {
  const list = idle.get(model) ?? [];
  const n = list.length;
  list.splice(0).forEach((e) => e.runner.dispose());
  return n;
}

/**
 * A runner holding at least `slots` sequences of `model` with the named unmerged adapter applied, each of
 * up to `maxLength` tokens (default: the runner's own cap): a device runner's cache is sized by both. It
 * keeps a prefix cache of `prefixCacheTokens` tokens (default 0: caching off); a runner handed on starts with an
 * empty one, since the weights may have changed while it was idle.
 */
export async function leaseRunner(model: CausalLM, opts: { adapter: string | null; slots: number; maxLength?: number; prefixCacheTokens?: number }): Promise<RunnerLease> {
  const kvCacheDtype = resolveKvCacheDtype(model);
  if (!webgpuRunnerFor(model)) {
    if (model.quantization) throw new T2sError("quantization_unsupported", `${model.quantization} sampling runs on the WebGPU step runner (webgpu backend, T2S_WEBGPU_RUNNER unset); this model runs on ${model.backend}`);
    const runner = new TfjsRunner(model, opts.slots, opts.adapter, opts.prefixCacheTokens);
    return { runner, release: () => runner.dispose() };
  }
  let kept = idle.get(model);
  if (!kept) {
    const list: IdleRunner[] = [];
    kept = list;
    idle.set(model, list);
    model.onDispose(() => list.splice(0).forEach((e) => e.runner.dispose()));
  }
  const quantization = model.quantization;
  const prefixCacheTokens = opts.prefixCacheTokens ?? 0;
  const i = kept.findIndex((e) => e.adapter === opts.adapter && e.quantization === quantization && e.kvCacheDtype === kvCacheDtype && e.prefixCacheTokens === prefixCacheTokens && e.runner.slots >= opts.slots && (opts.maxLength === undefined || (e.runner.maxLength ?? Infinity) >= opts.maxLength));
  let runner: StepRunner;
  if (i >= 0) {
    runner = kept.splice(i, 1)[0].runner;
    runner.weightsChanged?.();
  } else {
    const { createWebgpuRunner } = await import("./webgpu-runner.js");
    runner = await createWebgpuRunner(model, { adapter: opts.adapter, slots: opts.slots, maxLength: opts.maxLength, kvCacheDtype, prefixCacheTokens });
  }
  const list = kept;
  return { runner, release: () => list.push({ adapter: opts.adapter, quantization, kvCacheDtype, prefixCacheTokens, runner }) };
}
