/**
 * One forward pass of the decoder over a batch of token rows, as a list of WebGPU dispatches on buffers the
 * runner owns (activations, per-layer slot caches) and the model's own weight buffers (looked up on every
 * call: an optimizer may give a LoRA variable a new buffer between calls). Per layer: RMSNorm, the q/k/v
 * linears as one launch into one [M, (H + 2KV)·hd] buffer (biases in the epilogue), rotary + KV write,
 * attention, the o linear added into the residual stream, RMSNorm, gate|up as one launch into one [M, 2I]
 * buffer, and the down linear
 * (SwiGLU applied while loading its input) added into the residual; an adapter's LoRA pairs add two small
 * linears each. Then the final norm of the rows to sample and the lm head over those rows only.
 */
import type { ModelConfig } from "../config.js";
import type { CausalLM } from "../model.js";
import type { Linear } from "../decoder.js";
import { isPacked, storage, weightShape, type WeightMatrix } from "../packed.js";
import { tf } from "../../backend/tf.js";
import { type Dispatch, GpuContext } from "../../backend/webgpu/step/device.js";
import { type GemmSpec, gemmCode, gemmGroups, kernelShape, reduceWgsl, splitsFor } from "../../backend/webgpu/step/gemm.js";
import { embedWgsl, ropeTable, ropeWgsl, rmsNormWgsl } from "../../backend/webgpu/step/token-kernels.js";
import { attentionWgsl } from "../../backend/webgpu/step/attention.js";
import { int8Support } from "../../backend/webgpu/int8-support.js";
import { Int8Linears } from "./int8-linears.js";
import { T2sError } from "../../core/errors.js";
import { kvCacheElementBytes, kvCacheHalf, type KvCacheDtype } from "../kv-cache-dtype.js";
import type { Half } from "../../backend/webgpu/half.js";

/** The activation and cache buffers of a runner, sized for `tokens` token rows and `slots` sampled rows. */
export interface ForwardBuffers {
  dims: GPUBuffer;
  tok: GPUBuffer;
  srow: GPUBuffer;
  x: GPUBuffer;
  h: GPUBuffer;
  qkv: GPUBuffer;
  q: GPUBuffer;
  ctx: GPUBuffer;
  gu: GPUBuffer;
  loraT: GPUBuffer;
  hs: GPUBuffer;
  logits: GPUBuffer;
  rope: GPUBuffer;
  keys: GPUBuffer[];
  values: GPUBuffer[];
}

export class WebgpuForward {
  readonly c: ModelConfig;
  readonly bufs: ForwardBuffers;
  private readonly pipes = new Map<string, GPUComputePipeline>();
  private readonly loraRank: number;
  private part: GPUBuffer | null = null;
  private retired: GPUBuffer[] = [];
  /** The base's linears in int8 when the model samples quantized (model.quantization), else null. */
  private readonly int8: Int8Linears | null;
  /** The cache's 16-bit format (two values per u32 word), or undefined for float32. */
  private readonly kvHalf: Half | undefined;
  /** Bytes of every layer's key and value buffers together. */
  readonly cacheBytes: number;

  constructor(
    private readonly ctx: GpuContext,
    private readonly model: CausalLM,
    private readonly adapter: string | null,
    readonly tokens: number,
    readonly slots: number,
    readonly L: number,
    readonly kvCacheDtype: KvCacheDtype,
  ) {
    const c = (this.c = model.config);
    this.kvHalf = kvCacheHalf(kvCacheDtype);
    const F = 4;
    const width = (c.numHeads + 2 * c.numKvHeads) * c.headDim;
    let rank = 1;
    for (const l of model.weights.layers) for (const lin of [l.q, l.k, l.v, l.o, l.gate, l.up, l.down]) rank = Math.max(rank, this.pair(lin)?.a.shape[0] ?? 1);
    this.loraRank = rank;
    // one layer's keys (or values): [slot, kvHead, position, hd] at the cache's element size
    const cache = slots * c.numKvHeads * L * c.headDim * kvCacheElementBytes(kvCacheDtype);
    this.cacheBytes = 2 * c.numLayers * cache;
    const rope = ctx.buffer(ropeTable(L, model.invFreq).byteLength);
    ctx.device.queue.writeBuffer(rope, 0, ropeTable(L, model.invFreq));
    this.bufs = {
      dims: ctx.buffer(16, GPUBufferUsage.UNIFORM | GPUBufferUsage.COPY_DST),
      tok: ctx.buffer(Math.max(tokens, slots) * 16),
      srow: ctx.buffer(slots * 4),
      x: ctx.buffer(tokens * c.hiddenSize * F),
      h: ctx.buffer(tokens * c.hiddenSize * F),
      qkv: ctx.buffer(tokens * width * F),
      q: ctx.buffer(tokens * c.numHeads * c.headDim * F),
      ctx: ctx.buffer(tokens * c.numHeads * c.headDim * F),
      gu: ctx.buffer(tokens * 2 * c.intermediateSize * F),
      loraT: ctx.buffer(tokens * rank * F),
      hs: ctx.buffer(slots * c.hiddenSize * F),
      logits: ctx.buffer(slots * c.vocabSize * F),
      rope,
      keys: model.weights.layers.map(() => ctx.buffer(cache)),
      values: model.weights.layers.map(() => ctx.buffer(cache)),
    };
    this.int8 = null;
    if (model.quantization === "int8") {
      const support = int8Support();
      if (!support.mma) throw new T2sError("quantization_unsupported", `int8 quantization needs a GPU with int8 matrix units: ${support.why}`);
      this.int8 = new Int8Linears(ctx, support.mma, Int8Linears.groupsOf(model));
    }
  }

  private pair(lin: Linear) {
    return this.adapter ? lin.lora?.get(this.adapter) : undefined;
  }

  private pipe(code: string): GPUComputePipeline {
    let p = this.pipes.get(code);
    if (!p) {
      p = this.ctx.pipeline(code);
      this.pipes.set(code, p);
    }
    return p;
  }

  /**
   * One linear launch (plus its split-K sum): `weights` side by side as the output's columns (one, or the
   * parts of a fused q|k|v or gate|up), each with its bias when the spec has biases.
   */
  private gemm(list: Dispatch[], label: string, spec: Omit<GemmSpec, "splits" | "w16" | "parts">, rows: number, a: GPUBuffer, weights: WeightMatrix[], out: GPUBuffer, biases: tf.Tensor[] = []): void {
    // a 16-bit weight is bound as its packed words and widened inside the kernel
    const first = weights[0];
    const s: GemmSpec = {
      ...spec,
      splits: splitsFor(spec.K, spec.N, rows),
      ...(isPacked(first) ? { w16: first.dtype } : {}),
      ...(weights.length > 1 ? { parts: weights.map((w) => weightShape(w)[0]) } : {}),
    };
    const ws = weights.map((w) => this.ctx.bufferOf(storage(w)));
    const bs = biases.map((b) => this.ctx.bufferOf(b));
    // the pipeline depends on the spec and on the kernel shape (few rows or a tile), not on the exact count
    const key = `${JSON.stringify(s)}|${kernelShape(rows)}`;
    let p = this.pipes.get(key);
    if (!p) {
      p = this.ctx.pipeline(gemmCode(s, rows));
      this.pipes.set(key, p);
    }
    if (s.splits === 1) {
      list.push({ label, pipeline: p, buffers: [this.bufs.dims, a, ws[0], out, ...ws.slice(1), ...bs], groups: gemmGroups(s, rows) });
      return;
    }
    const part = this.scratch(s.splits * rows * s.N);
    list.push({ label, pipeline: p, buffers: [this.bufs.dims, a, ws[0], part, ...ws.slice(1)], groups: gemmGroups(s, rows) });
    const rkey = `reduce|${key}`;
    let rp = this.pipes.get(rkey);
    if (!rp) {
      rp = this.ctx.pipeline(reduceWgsl(s));
      this.pipes.set(rkey, rp);
    }
    list.push({ label, pipeline: rp, buffers: [this.bufs.dims, part, out, ...bs], groups: GpuContext.groups1d(Math.ceil((rows * s.N) / 256)) });
  }

  /** The split-K partial-sum buffer, grown to `floats` . */
  private scratch(floats: number): GPUBuffer {
    if (!this.part || this.part.size < floats * 4) {
      // earlier dispatches of the list being built may bind the old one: it goes when the next list starts
      if (this.part) this.retired.push(this.part);
      this.part = this.ctx.buffer(floats * 4 * 1.25);
    }
    return this.part;
  }

  /**
   * Linear layers of one input side by side (q|k|v, gate|up; or one) into columns [off, off + Σ out) of
   * `out`, rows of stride `ldo`, plus each one's LoRA pair under the runner's adapter. Layers of one storage
   * and K run as one launch.
   */
  private linear(list: Dispatch[], label: string, lins: Linear[], rows: number, a: GPUBuffer, io: { lda: number; swiglu: boolean; out: GPUBuffer; ldo: number; off: number; mode: "store" | "add" }): void {
    const kOf = (l: Linear) => weightShape(l.weight)[1];
    const dtypeOf = (l: Linear) => (isPacked(l.weight) ? l.weight.dtype : "float32");
    const fused = lins.every((l) => kOf(l) === kOf(lins[0]) && dtypeOf(l) === dtypeOf(lins[0]) && (l.bias === undefined) === (lins[0].bias === undefined));
    // an int8 copy holds the whole group side by side, whatever the storage of its parts
    const quantized = this.int8?.has(lins[0].weight) ?? false;
    if (quantized) this.int8!.linear(list, label, this.bufs.dims, lins[0].weight, rows, a, { ...io, rows: "M" });
    const groups = quantized ? [] : fused ? [lins] : lins.map((l) => [l]);
    let off = io.off;
    for (const g of groups) {
      const K = kOf(g[0]);
      const N = g.reduce((n, l) => n + weightShape(l.weight)[0], 0);
      const biases = g.flatMap((l) => (l.bias ? [l.bias] : []));
      this.gemm(list, label, { K, N, lda: io.lda, ldo: io.ldo, off, bias: biases.length > 0, mode: io.mode, scale: 1, swiglu: io.swiglu, rows: "M" }, rows, a, g.map((l) => l.weight), io.out, biases);
      off += N;
    }
    off = io.off;
    for (const lin of lins) {
      const [N, K] = weightShape(lin.weight);
      const pair = this.pair(lin);
      if (pair) {
        const r = pair.a.shape[0];
        this.gemm(list, "lora", { K, N: r, lda: io.lda, ldo: this.loraRank, off: 0, bias: false, mode: "store", scale: 1, swiglu: io.swiglu, rows: "M" }, rows, a, [pair.a], this.bufs.loraT);
        this.gemm(list, "lora", { K: r, N, lda: this.loraRank, ldo: io.ldo, off, bias: false, mode: "add", scale: pair.scale, swiglu: false, rows: "M" }, rows, this.bufs.loraT, [pair.b], io.out);
      }
      off += N;
    }
  }

  /** The dispatches of one forward pass over M token rows, ending in logits for the R sampled rows. */
  dispatches(M: number, R: number): Dispatch[] {
    // destroy() waits for submitted work that uses a buffer, so the last call's retired scratch can go now
    for (const b of this.retired.splice(0)) b.destroy();
    this.int8?.startCall();
    const { c, bufs } = this;
    const w = this.model.weights;
    const D = c.hiddenSize;
    const H = c.numHeads;
    const KV = c.numKvHeads;
    const hd = c.headDim;
    const I = c.intermediateSize;
    const width = (H + 2 * KV) * hd;
    const list: Dispatch[] = [];
    const rowsGroups = GpuContext.groups1d(M);
    list.push({ label: "embed", pipeline: this.pipe(embedWgsl(D, isPacked(w.embed) ? w.embed.dtype : undefined)), buffers: [bufs.dims, bufs.tok, this.ctx.bufferOf(storage(w.embed)), bufs.x], groups: rowsGroups });
    const norm = this.pipe(rmsNormWgsl(D, c.rmsNormEps, false));
    const rope = this.pipe(ropeWgsl({ H, KV, hd, L: this.L, eps: c.rmsNormEps, qkNorm: c.qkNorm, kv: this.kvHalf }));
    const attn = this.pipe(attentionWgsl({ H, KV, hd, L: this.L, kv: this.kvHalf }));
    w.layers.forEach((l, i) => {
      list.push({ label: "rmsnorm", pipeline: norm, buffers: [bufs.dims, bufs.x, this.ctx.bufferOf(l.inputNorm), bufs.h], groups: rowsGroups });
      this.linear(list, "qkv", [l.q, l.k, l.v], M, bufs.h, { lda: D, swiglu: false, out: bufs.qkv, ldo: width, off: 0, mode: "store" });
      const ropeBufs = [bufs.dims, bufs.qkv, bufs.rope, bufs.tok, bufs.q, bufs.keys[i], bufs.values[i]];
      if (c.qkNorm) {
        if (!l.qNorm || !l.kNorm) throw new Error(`layer ${i} has no q/k norm weights`);
        ropeBufs.push(this.ctx.bufferOf(l.qNorm), this.ctx.bufferOf(l.kNorm));
      }
      list.push({ label: "rope+kv", pipeline: rope, buffers: ropeBufs, groups: [H + 2 * KV, M, 1] });
      list.push({ label: "attention", pipeline: attn, buffers: [bufs.dims, bufs.q, bufs.keys[i], bufs.values[i], bufs.tok, bufs.ctx], groups: [H, M, 1] });
      this.linear(list, "o", [l.o], M, bufs.ctx, { lda: H * hd, swiglu: false, out: bufs.x, ldo: D, off: 0, mode: "add" });
      list.push({ label: "rmsnorm", pipeline: norm, buffers: [bufs.dims, bufs.x, this.ctx.bufferOf(l.postNorm), bufs.h], groups: rowsGroups });
      this.linear(list, "gate|up", [l.gate, l.up], M, bufs.h, { lda: D, swiglu: false, out: bufs.gu, ldo: 2 * I, off: 0, mode: "store" });
      this.linear(list, "down", [l.down], M, bufs.gu, { lda: 2 * I, swiglu: true, out: bufs.x, ldo: D, off: 0, mode: "add" });
    });
    list.push({ label: "final norm", pipeline: this.pipe(rmsNormWgsl(D, c.rmsNormEps, true)), buffers: [bufs.dims, bufs.x, this.ctx.bufferOf(w.norm), bufs.hs, bufs.srow], groups: GpuContext.groups1d(R) });
    const head = w.lmHead ?? w.embed;
    if (this.int8) this.int8.linear(list, "lm head", bufs.dims, head, R, bufs.hs, { lda: D, swiglu: false, out: bufs.logits, ldo: c.vocabSize, off: 0, mode: "store", rows: "R" });
    else this.gemm(list, "lm head", { K: D, N: c.vocabSize, lda: D, ldo: c.vocabSize, off: 0, bias: false, mode: "store", scale: 1, swiglu: false, rows: "R" }, R, bufs.hs, [head], bufs.logits);
    return list;
  }

  dispose(): void {
    const b = this.bufs;
    this.part?.destroy();
    this.int8?.dispose();
    for (const buf of [b.dims, b.tok, b.srow, b.x, b.h, b.qkv, b.q, b.ctx, b.gu, b.loraT, b.hs, b.logits, b.rope, ...b.keys, ...b.values]) buf.destroy();
  }
}
