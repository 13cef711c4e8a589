/**
 * The step runner on WebGPU (engine/runner.ts is the contract). Everything runs on the tfjs webgpu backend's
 * own device, on the model's weight buffers: each slot has its KV cache in per-layer GPU buffers written in
 * place, prefill runs every prompt token as a row of the same kernels decode uses (chunked when prompts are
 * long), and sampling happens on the device, so only ids and log-probabilities come back. `decodeSteps`
 * records all its steps into one command buffer, the sampler writing each sampled id into the next step's
 * input, and reads back once.
 */
import type { CausalLM } from "../model.js";
import { tf } from "../../backend/tf.js";
import type { DecodeRow, MultiStepRunner, PrefillRow, RowSampling, SampledToken } from "./runner.js";
import { type Dispatch, GpuContext, Profiler } from "../../backend/webgpu/step/device.js";
import { WebgpuForward } from "./webgpu-forward.js";
import { prefixCopyWgsl } from "../../backend/webgpu/step/token-kernels.js";
import { type SlotCopy, WebgpuPrefixCache } from "./webgpu-prefix-cache.js";
import { prefixCacheSlots, type PrefixCacheCounters } from "./prefix-cache.js";
import { assertKvCacheDtype, kvCacheHalf, type KvCacheDtype } from "../kv-cache-dtype.js";
import { ADVANCE_WGSL, FLAG_ALLOW_LIST, FLAG_RAW_LOGPROBS, MAX_TOP, OUT_WORDS, PARAM_WORDS, samplerWgsl } from "../../backend/webgpu/step/sampling.js";

/** Token rows one forward pass holds; longer prefills run in chunks of this many tokens. */
const PREFILL_CHUNK = 1024;
/** Stand-in for -Infinity in a bias (WGSL has no infinities): exp of it is 0. */
const BANNED = -3e38;

/** GPU time per kernel label over one profiled call, in ms, with the launch count. */
export type KernelProfile = Map<string, { ms: number; count: number }>;

/** A growable device buffer written from the host before each call. */
class HostBuffer {
  buf: GPUBuffer | null = null;
  constructor(private readonly ctx: GpuContext) {}
  write(data: Uint32Array): GPUBuffer {
    if (!this.buf || this.buf.size < data.byteLength) {
      this.buf?.destroy();
      this.buf = this.ctx.buffer(Math.max(256, data.byteLength * 2));
    }
    this.ctx.device.queue.writeBuffer(this.buf, 0, data.buffer, data.byteOffset, Math.ceil(data.byteLength / 4) * 4);
    return this.buf;
  }
}

export class WebgpuRunner implements MultiStepRunner {
  readonly slots: number;
  /** Prefill runs in chunks of PREFILL_CHUNK tokens inside one call, so one call may take every admitted row. */
  readonly prefillTokens = 1 << 20;
  /** Each call ends in a read-back that waits for the device; chaining 16 steps pays it once per 16 tokens. */
  readonly chainSteps = 16;
  private readonly fwd: WebgpuForward;
  private readonly sampler: GPUComputePipeline;
  private readonly advance: GPUComputePipeline;
  private readonly copier: GPUComputePipeline;
  private readonly params: HostBuffer;
  private readonly bias: HostBuffer;
  private readonly state: GPUBuffer;
  private readonly probs: GPUBuffer;
  private out: GPUBuffer;
  private readonly lengths: Int32Array;
  /** Stored prompt prefixes, in cache slots after the sequences' slots. */
  private readonly prefixes: WebgpuPrefixCache;
  private profileNext = false;
  /** Per-kernel GPU times of the last call made after `profile()`. */
  lastProfile: KernelProfile | null = null;

  constructor(private readonly ctx: GpuContext, private readonly model: CausalLM, adapter: string | null, slots: number, readonly maxLength: number, readonly kvCacheDtype: KvCacheDtype, readonly prefixCacheTokens = 0) {
    this.slots = slots;
    // the prefix cache's slots are counted here, in the same per-layer buffers as the sequences' slots
    const cacheSlots = prefixCacheSlots(prefixCacheTokens, maxLength);
    this.prefixes = new WebgpuPrefixCache(slots, cacheSlots);
    this.fwd = new WebgpuForward(ctx, model, adapter, Math.max(PREFILL_CHUNK, slots), slots + cacheSlots, maxLength, kvCacheDtype);
    this.sampler = ctx.pipeline(samplerWgsl(model.config.vocabSize));
    this.advance = ctx.pipeline(ADVANCE_WGSL);
    this.copier = ctx.pipeline(prefixCopyWgsl(model.config.numKvHeads, maxLength, model.config.headDim, kvCacheHalf(kvCacheDtype)));
    this.params = new HostBuffer(ctx);
    this.bias = new HostBuffer(ctx);
    this.state = ctx.buffer(16);
    this.probs = ctx.buffer(slots * model.config.vocabSize * 4);
    this.out = ctx.buffer(slots * OUT_WORDS * 4);
    this.lengths = new Int32Array(slots).fill(-1);
  }

  /** Bytes of the KV cache on the device (every layer's keys and values, all slots). */
  get cacheBytes(): number {
    return this.fwd.cacheBytes;
  }

  /** Whether the device offers timestamp queries (for `profile`). */
  get canProfile(): boolean {
    return this.ctx.timestamps;
  }

  /** Profiles the next call: one compute pass per dispatch with timestamps (slower; for benches). */
  profile(): void {
    if (!this.ctx.timestamps) throw new Error("this device has no timestamp-query feature");
    this.profileNext = true;
  }

  private checkSlot(slot: number): void {
    if (!Number.isInteger(slot) || slot < 0 || slot >= this.slots) throw new RangeError(`slot ${slot} is outside [0, ${this.slots})`);
  }

  /** Packs the rows' sampling settings (steps x rows) and their sparse biases. */
  private packSampling(sampling: RowSampling[][]): { params: Uint32Array; bias: Uint32Array } {
    const V = this.model.config.vocabSize;
    const R = sampling[0]?.length ?? 0;
    const params = new Uint32Array(Math.max(1, sampling.length * R) * PARAM_WORDS);
    const pf = new Float32Array(params.buffer);
    const bias: number[] = [];
    const f = new Float32Array(1);
    const fBits = new Uint32Array(f.buffer);
    sampling.forEach((row, s) =>
      row.forEach((p, r) => {
        const o = (s * R + r) * PARAM_WORDS;
        pf[o] = p.temperature > 0 ? p.temperature : 0;
        pf[o + 1] = p.topP > 0 && p.topP < 1 ? p.topP : 1;
        params[o + 2] = p.topK > 0 ? Math.floor(p.topK) : 0;
        // a u that rounds up to 1 in f32 would fall past the kept mass; the kernel then takes the last kept token
        pf[o + 3] = Math.min(Math.max(p.u, 0), 1);
        params[o + 4] = Math.min(Math.max(0, Math.floor(p.topLogprobs ?? 0)), MAX_TOP);
        params[o + 5] = bias.length / 2;
        for (const [id] of p.bias ?? []) if (!Number.isInteger(id) || id < 0 || id >= V) throw new RangeError(`bias token ${id} is outside the vocabulary [0, ${V})`);
        const before = bias.length;
        const push = (id: number, b: number) => {
          f[0] = Math.max(BANNED, Math.min(3e38, b));
          bias.push(id, fBits[0]);
        };
        let flags = p.rawLogprobs ? FLAG_RAW_LOGPROBS : 0;
        const mask = p.allowed;
        if (mask && allowedCount(mask, V) <= V / 2) {
          // guided decoding, few tokens allowed: the allow list, each with its bias
          flags |= FLAG_ALLOW_LIST;
          forEachBit(mask, V, true, (id) => push(id, p.bias?.get(id) ?? 0));
        } else {
          for (const [id, b] of p.bias ?? []) if (b !== 0 && !Number.isNaN(b) && (!mask || isSet(mask, id))) push(id, b);
          // most tokens allowed: the banned ones, as bias
          if (mask) forEachBit(mask, V, false, (id) => push(id, BANNED));
        }
        params[o + 6] = (bias.length - before) / 2;
        params[o + 7] = flags;
      }),
    );
    return { params, bias: new Uint32Array(bias.length ? bias : [0, 0]) };
  }

  /**
   * Runs `steps` forward passes over the token rows (one in prefill) with the sampler after each, and
   * returns the results of every step and sampled row.
   */
  private async run(tok: Uint32Array, srow: Uint32Array, M: number, R: number, sampling: RowSampling[][], decode: boolean): Promise<SampledToken[][]> {
    const S = sampling.length;
    const { bufs } = this.fwd;
    const q = this.ctx.device.queue;
    q.writeBuffer(bufs.dims, 0, new Uint32Array([M, R, decode ? 1 : 0, 0]));
    q.writeBuffer(bufs.tok, 0, tok);
    q.writeBuffer(bufs.srow, 0, srow.length ? srow : new Uint32Array(1));
    q.writeBuffer(this.state, 0, new Uint32Array(4));
    const packed = this.packSampling(sampling);
    const params = this.params.write(packed.params);
    const bias = this.bias.write(packed.bias);
    const outBytes = S * R * OUT_WORDS * 4;
    if (this.out.size < outBytes) {
      this.out.destroy();
      this.out = this.ctx.buffer(outBytes * 2);
    }
    this.ctx.device.pushErrorScope("validation");
    const forward = this.fwd.dispatches(M, R);
    const sample: Dispatch = { label: "sample", pipeline: this.sampler, buffers: [bufs.dims, bufs.logits, params, bias, this.out, bufs.tok, this.state, this.probs], groups: [R, 1, 1] };
    const advance: Dispatch = { label: "advance", pipeline: this.advance, buffers: [bufs.dims, this.state], groups: [1, 1, 1] };
    const list: Dispatch[] = [];
    for (let s = 0; s < S; s++) {
      if (s > 0) list.push(advance);
      list.push(...forward, sample);
    }
    // weight lookups above may have queued uploads in tfjs's encoder: they must reach the queue first
    this.ctx.flushTfjs();
    const encoder = this.ctx.device.createCommandEncoder();
    const profiler = this.profileNext ? new Profiler(this.ctx, list.length) : null;
    this.profileNext = false;
    this.ctx.encode(encoder, list, profiler);
    const read = this.ctx.readBack(encoder, this.out, outBytes);
    const readProfile = profiler?.resolve(encoder);
    q.submit([encoder.finish()]);
    const err = await this.ctx.device.popErrorScope();
    if (err) throw new Error(`WebGPU runner: ${err.message}`);
    const words = new Uint32Array(await read());
    if (readProfile) this.lastProfile = await readProfile();
    const floats = new Float32Array(words.buffer);
    return Array.from({ length: S }, (_, s) =>
      Array.from({ length: R }, (_, r) => {
        const o = (s * R + r) * OUT_WORDS;
        const t: SampledToken = { id: words[o], logprob: floats[o + 1] };
        const n = sampling[s][r].topLogprobs ?? 0;
        if (n > 0) t.top = Array.from({ length: Math.min(n, MAX_TOP) }, (_, j) => ({ id: words[o + 2 + 2 * j], logprob: floats[o + 3 + 2 * j] }));
        return t;
      }),
    );
  }

  async prefill(rows: PrefillRow[]): Promise<SampledToken[]> {
    if (rows.length > this.slots) throw new RangeError(`${rows.length} rows do not fit ${this.slots} slots`);
    const V = this.model.config.vocabSize;
    const seen = new Set<number>();
    for (const r of rows) {
      this.checkSlot(r.slot);
      if (seen.has(r.slot)) throw new RangeError(`slot ${r.slot} appears twice in one prefill`);
      seen.add(r.slot);
      if (r.ids.length === 0) throw new RangeError("a prefill row needs at least one token");
      if (r.ids.length > this.maxLength) throw new RangeError(`a prompt of ${r.ids.length} tokens does not fit the ${this.maxLength}-token cache`);
      for (const id of r.ids) if (!Number.isInteger(id) || id < 0 || id >= V) throw new RangeError(`token id ${id} is outside the vocabulary [0, ${V})`);
    }
    const results: SampledToken[] = new Array(rows.length);
    // a row copies the longest prefix it can instead of computing it: from the prefix cache, or from an
    // earlier row of this call with the same prefix (prefilled first, whole); then the others' suffixes
    const plans = this.prefixes.plan(rows);
    const start = plans.map((p) => p.start);
    const order = rows.map((_, i) => i);
    try {
      this.copyPrefixes(this.prefixes.copiesFor(rows, plans, 1));
      await this.prefillRows(rows, order.filter((i) => plans[i].phase === 1), start, results);
      this.copyPrefixes(this.prefixes.copiesFor(rows, plans, 2));
      await this.prefillRows(rows, order.filter((i) => plans[i].phase === 2), start, results);
    } catch (e) {
      this.prefixes.abandon(plans);
      throw e;
    }
    // the prompts' full blocks stay cached for later calls (copied before the slots are reused)
    this.copyPrefixes(this.prefixes.store(rows, plans));
    for (const r of rows) this.lengths[r.slot] = r.ids.length;
    return results;
  }

  /** Runs rows `which` from position start[row] on, every prompt token a row of the forward (in chunks). */
  private async prefillRows(rows: PrefillRow[], which: number[], start: number[], results: SampledToken[]): Promise<void> {
    // a chunk samples the rows whose last token it holds
    const chunk = this.fwd.tokens;
    let pending: { row: number; pos: number }[] = [];
    const flush = async () => {
      const M = pending.length;
      const tok = new Uint32Array(M * 4);
      const srow: number[] = [];
      const sampled: number[] = [];
      pending.forEach((e, i) => {
        const r = rows[e.row];
        tok.set([r.ids[e.pos], r.slot, e.pos, 0], i * 4);
        if (e.pos === r.ids.length - 1) {
          srow.push(i);
          sampled.push(e.row);
        }
      });
      const out = await this.run(tok, new Uint32Array(srow), M, srow.length, [sampled.map((r) => rows[r].sampling)], false);
      sampled.forEach((r, i) => (results[r] = out[0][i]));
      pending = [];
    };
    for (const r of which) {
      for (let p = start[r]; p < rows[r].ids.length; p++) {
        pending.push({ row: r, pos: p });
        if (pending.length === chunk) await flush();
      }
    }
    if (pending.length) await flush();
  }

  /** Copies positions [0, len) of every layer's keys and values from slot src to slot dst, for each copy. */
  private copyPrefixes(copies: SlotCopy[]): void {
    if (!copies.length) return;
    const c = this.model.config;
    const table = new Uint32Array(copies.flatMap((x) => [x.src, x.dst, x.len, 0]));
    const longest = Math.max(...copies.map((x) => x.len));
    const buf = this.ctx.buffer(table.byteLength);
    this.ctx.device.queue.writeBuffer(buf, 0, table);
    const list: Dispatch[] = this.fwd.bufs.keys.map((k, l) => ({
      label: "prefix copy",
      pipeline: this.copier,
      buffers: [buf, k, this.fwd.bufs.values[l]],
      groups: [Math.ceil((longest * c.headDim) / 256), copies.length, c.numKvHeads],
    }));
    const encoder = this.ctx.device.createCommandEncoder();
    this.ctx.encode(encoder, list);
    this.ctx.device.queue.submit([encoder.finish()]);
    buf.destroy();
  }

  async decode(rows: DecodeRow[]): Promise<SampledToken[]> {
    const out = await this.decodeSteps(rows, [rows.map((r) => r.sampling)]);
    return out.map((t) => t[0]);
  }

  async decodeSteps(rows: Omit<DecodeRow, "sampling">[], sampling: RowSampling[][]): Promise<SampledToken[][]> {
    const R = rows.length;
    if (R === 0 || sampling.length === 0) return rows.map(() => []);
    if (R > this.slots) throw new RangeError(`${R} rows do not fit ${this.slots} slots`);
    if (sampling.some((s) => s.length !== R)) throw new RangeError("every step needs one sampling entry per row");
    const V = this.model.config.vocabSize;
    const tok = new Uint32Array(R * 4);
    rows.forEach((r, i) => {
      this.checkSlot(r.slot);
      if (this.lengths[r.slot] < 0) throw new RangeError(`slot ${r.slot} holds no sequence (prefill it first)`);
      if (!Number.isInteger(r.id) || r.id < 0 || r.id >= V) throw new RangeError(`token id ${r.id} is outside the vocabulary [0, ${V})`);
      if (r.position + sampling.length > this.maxLength) throw new RangeError(`position ${r.position + sampling.length - 1} is past the ${this.maxLength}-token cache`);
      tok.set([r.id, r.slot, r.position, 0], i * 4);
    });
    const out = await this.run(tok, Uint32Array.from(rows, (_, i) => i), R, R, sampling, true);
    rows.forEach((r) => (this.lengths[r.slot] = r.position + sampling.length));
    return rows.map((_, r) => out.map((step) => step[r]));
  }

  release(slot: number): void {
    this.checkSlot(slot);
    this.lengths[slot] = -1;
  }

  get prefixCache(): PrefixCacheCounters | undefined {
    return this.prefixes.cacheSlots > 0 ? this.prefixes.counters : undefined;
  }

  weightsChanged(): void {
    this.prefixes.clear();
  }

  dispose(): void {
    this.fwd.dispose();
    for (const b of [this.state, this.probs, this.out, this.params.buf, this.bias.buf]) b?.destroy();
  }
}

/**
 * A WebGPU runner for `model` with `slots` sequences of up to `maxLength` tokens (default: the model's
 * limit, at most 2048), applying the unmerged adapter `adapter` (null: none), its cache stored as
 * `kvCacheDtype` (default fp32; engines pass the model's setting as runners.ts resolves it), with a prefix
 * cache of `prefixCacheTokens` tokens (default 0: caching off). The webgpu backend must be active
 * (lib/backend/select.ts useBackend("webgpu")).
 */
export async function createWebgpuRunner(model: CausalLM, opts: { adapter: string | null; slots: number; maxLength?: number; kvCacheDtype?: KvCacheDtype; prefixCacheTokens?: number }): Promise<MultiStepRunner> {
  if (tf.getBackend() !== "webgpu") throw new Error(`the WebGPU runner needs the webgpu backend (active: ${tf.getBackend()})`);
  if (opts.adapter !== null && !model.adapters.has(opts.adapter)) throw new RangeError(`model ${model.name} has no adapter named ${opts.adapter}`);
  if (!Number.isInteger(opts.slots) || opts.slots < 1) throw new RangeError(`slots must be a positive integer, got ${opts.slots}`);
  const maxLength = opts.maxLength ?? Math.min(model.config.maxPositions, 2048);
  const kvCacheDtype = opts.kvCacheDtype ?? "fp32";
  assertKvCacheDtype(kvCacheDtype, model.config, { webgpuRunner: true, backend: "webgpu" });
  const ctx = new GpuContext();
  // compile errors surface here rather than in the first call
  ctx.device.pushErrorScope("validation");
  const runner = new WebgpuRunner(ctx, model, opts.adapter, opts.slots, maxLength, kvCacheDtype, opts.prefixCacheTokens ?? 0);
  const err = await ctx.device.popErrorScope();
  if (err) throw new Error(`WebGPU runner setup failed: ${err.message}`);
  return runner;
}

/** Whether token `id` is set in a guided-decoding bitmask. */
function isSet(mask: Int32Array, id: number): boolean {
  return ((mask[id >> 5] >>> (id & 31)) & 1) === 1;
}

/** Tokens a bitmask allows among the first V. */
function allowedCount(mask: Int32Array, V: number): number {
  let n = 0;
  for (let w = 0; w * 32 < V; w++) {
    let x = mask[w] ?? 0;
    if (w * 32 + 32 > V) x &= (1 << (V - w * 32)) - 1;
    x -= (x >>> 1) & 0x55555555;
    x = (x & 0x33333333) + ((x >>> 2) & 0x33333333);
    n += (((x + (x >>> 4)) & 0x0f0f0f0f) * 0x01010101) >>> 24;
  }
  return n;
}

/** Calls `f` for each of the first V tokens whose bit is `set` (or clear). */
function forEachBit(mask: Int32Array, V: number, set: boolean, f: (id: number) => void): void {
  for (let w = 0; w * 32 < V; w++) {
    const bits = set ? mask[w] ?? 0 : ~(mask[w] ?? 0);
    if (bits === 0) continue;
    const end = Math.min(V, w * 32 + 32);
    for (let id = w * 32; id < end; id++) if ((bits >>> (id & 31)) & 1) f(id);
  }
}
