/**
 * The base model's linear layers in int8 for the WebGPU step runner (`quantization: "int8"`): each group
 * the forward runs as one launch (q|k|v, o, gate|up, down, the head) is quantized once, when the runner is
 * built, into one int8 matrix with a scale per output row and one concatenated bias. A call then runs:
 *  - few rows (decode at batch <= 8): the int8 weights against float32 activations (gemm.ts, `w8`), so a
 *    step streams a quarter of fp32's weight bytes;
 *  - more rows: W8A8 (lib/backend/webgpu/step/int8.ts): the input rows quantized per token, the int8 GEMM on
 *    the matrix units, and one epilogue (dequantize, bias, store or residual add).
 * LoRA pairs stay float32 beside it (webgpu-forward.ts), reading the unquantized input. Runners are rebuilt
 * after every training update (runners.ts), so full-weight training samples from freshly quantized weights.
 */
import type { CausalLM } from "../model.js";
import type { Linear } from "../decoder.js";
import { isPacked, storage, weightShape, type WeightMatrix } from "../packed.js";
import { type Dispatch, GpuContext } from "../../backend/webgpu/step/device.js";
import { GEMV_MAX_ROWS, gemmCode, gemmGroups, type GemmSpec } from "../../backend/webgpu/step/gemm.js";
import { int8EpilogueWgsl, int8GemmGroups, int8GemmWgsl, int8SplitsFor, int8TileFor, paddedK, quantizeRowsWgsl, resultRows, resultStride, tileRows, type MmaKind } from "../../backend/webgpu/step/int8.js";
import type { tf } from "../../backend/tf.js";

/** One quantized group: int8 rows [N, paddedK(K)], a scale per row, the parts' biases side by side. */
interface Int8Weight {
  q: GPUBuffer;
  scales: GPUBuffer;
  bias: GPUBuffer | null;
  N: number;
  K: number;
}

/** Where a linear's input comes from and where its output goes (as webgpu-forward.ts's linear takes them). */
export interface LinearIo {
  lda: number;
  swiglu: boolean;
  out: GPUBuffer;
  ldo: number;
  off: number;
  mode: "store" | "add";
  rows: "M" | "R";
}

export class Int8Linears {
  private readonly groups = new Map<WeightMatrix, Int8Weight>();
  private readonly pipes = new Map<string, GPUComputePipeline>();
  private qa: GPUBuffer | null = null;
  private sa: GPUBuffer | null = null;
  private c: GPUBuffer | null = null;
  private retired: GPUBuffer[] = [];

  /** Quantizes `groups` (each the weights of one launch, with their biases) on the device. */
  constructor(private readonly ctx: GpuContext, private readonly mma: MmaKind, groups: { weights: WeightMatrix[]; biases: (tf.Tensor | undefined)[] }[]) {
    const list: Dispatch[] = [];
    const copies: [GPUBuffer, GPUBuffer, number, number][] = [];
    for (const g of groups) {
      const K = weightShape(g.weights[0])[1];
      const N = g.weights.reduce((n, w) => n + weightShape(w)[0], 0);
      const q = ctx.buffer(N * paddedK(K));
      const scales = ctx.buffer(N * 4);
      const bias = g.biases.some((b) => b) ? ctx.buffer(N * 4) : null;
      let off = 0;
      g.weights.forEach((w, i) => {
        const rows = weightShape(w)[0];
        const code = quantizeRowsWgsl({ kind: "weight", rows, K, off, ...(isPacked(w) ? { w16: w.dtype } : {}) });
        list.push({ label: "quantize weights", pipeline: this.pipe(code, code), buffers: [ctx.bufferOf(storage(w)), q, scales], groups: GpuContext.groups1d(rows) });
        const b = g.biases[i];
        if (b && bias) copies.push([ctx.bufferOf(b), bias, off * 4, rows * 4]);
        off += rows;
      });
      this.groups.set(g.weights[0], { q, scales, bias, N, K });
    }
    ctx.flushTfjs();
    const encoder = ctx.device.createCommandEncoder();
    ctx.encode(encoder, list);
    for (const [src, dst, at, bytes] of copies) encoder.copyBufferToBuffer(src, 0, dst, at, bytes);
    ctx.device.queue.submit([encoder.finish()]);
  }

  /** The groups of a model as its forward runs them: per layer q|k|v, o, gate|up, down; then the head. */
  static groupsOf(model: CausalLM): { weights: WeightMatrix[]; biases: (tf.Tensor | undefined)[] }[] {
    const of = (lins: Linear[]) => ({ weights: lins.map((l) => l.weight), biases: lins.map((l) => l.bias) });
    const out = model.weights.layers.flatMap((l) => [of([l.q, l.k, l.v]), of([l.o]), of([l.gate, l.up]), of([l.down])]);
    out.push({ weights: [model.weights.lmHead ?? model.weights.embed], biases: [undefined] });
    return out;
  }

  /** Whether `first` (a group's first weight) was quantized here. */
  has(first: WeightMatrix): boolean {
    return this.groups.has(first);
  }

  private pipe(key: string, code: string | (() => string)): GPUComputePipeline {
    let p = this.pipes.get(key);
    if (!p) {
      p = this.ctx.pipeline(typeof code === "string" ? code : code());
      this.pipes.set(key, p);
    }
    return p;
  }

  /** A scratch buffer of at least `bytes`, grown (the old one retired until the next call) when short. */
  private grow(buf: GPUBuffer | null, bytes: number): GPUBuffer {
    if (buf && buf.size >= bytes) return buf;
    if (buf) this.retired.push(buf);
    return this.ctx.buffer(bytes * 1.25);
  }

  /** Frees scratch buffers replaced during the previous call (its work has been submitted by now). */
  startCall(): void {
    for (const b of this.retired.splice(0)) b.destroy();
  }

  /** Appends the dispatches of group `first` over `rows` input rows of `a`, into `io.out`. */
  linear(list: Dispatch[], label: string, dims: GPUBuffer, first: WeightMatrix, rows: number, a: GPUBuffer, io: LinearIo): void {
    const w = this.groups.get(first);
    if (!w) throw new Error(`${label}: this weight was not quantized`);
    const { N, K } = w;
    if (rows <= GEMV_MAX_ROWS) {
      const s: GemmSpec = { K, N, lda: io.lda, ldo: io.ldo, off: io.off, bias: w.bias !== null, mode: io.mode, scale: 1, swiglu: io.swiglu, rows: io.rows, splits: 1, w8: true };
      const key = `w8|${JSON.stringify(s)}`;
      list.push({ label, pipeline: this.pipe(key, () => gemmCode(s, rows)), buffers: [dims, a, w.q, io.out, ...(w.bias ? [w.bias] : []), w.scales], groups: gemmGroups(s, rows) });
      return;
    }
    const Kp = paddedK(K);
    const qa = (this.qa = this.grow(this.qa, rows * Kp));
    const sa = (this.sa = this.grow(this.sa, rows * 4));
    const tile = int8TileFor(rows);
    const splits = int8SplitsFor(K, N, rows);
    const c = (this.c = this.grow(this.c, splits * resultRows(rows, tile) * resultStride(N, tile) * 4));
    const quant = { kind: "activation" as const, rows: io.rows, K, lda: io.lda, swiglu: io.swiglu };
    list.push({ label: `${label} quantize`, pipeline: this.pipe(`q|${JSON.stringify(quant)}`, () => quantizeRowsWgsl(quant)), buffers: [dims, a, qa, sa], groups: GpuContext.groups1d(rows) });
    const spec = { K, N, rows: io.rows, splits };
    list.push({ label, pipeline: this.pipe(`g|${tile.name}|${JSON.stringify(spec)}`, () => int8GemmWgsl(spec, rows, this.mma)), buffers: [dims, qa, w.q, c], groups: int8GemmGroups(spec, rows) });
    const epi = { N, rows: io.rows, splits, stride: resultStride(N, tile), tileRows: tileRows(tile), ldo: io.ldo, off: io.off, scale: 1, bias: w.bias !== null, mode: io.mode };
    list.push({ label: `${label} epilogue`, pipeline: this.pipe(`e|${JSON.stringify(epi)}`, () => int8EpilogueWgsl(epi)), buffers: [dims, c, sa, w.scales, io.out, ...(w.bias ? [w.bias] : [])], groups: GpuContext.groups1d(Math.ceil((rows * N) / 256)) });
  }

  /** Bytes of the quantized weights on the device. */
  get bytes(): number {
    let n = 0;
    for (const w of this.groups.values()) n += w.q.size + w.scales.size + (w.bias?.size ?? 0);
    return n;
  }

  dispose(): void {
    for (const w of this.groups.values()) for (const b of [w.q, w.scales, w.bias]) b?.destroy();
    for (const b of [this.qa, this.sa, this.c, ...this.retired]) b?.destroy();
  }
}
