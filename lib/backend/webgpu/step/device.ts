/// <reference types="@webgpu/types" />
/**
 * The raw WebGPU layer under the step runner: the tfjs webgpu backend's own GPUDevice, the GPUBuffer behind
 * a tensor, compiled pipelines (one per WGSL source), bind groups cached by the identity of the buffers they
 * bind, and a recorder that encodes many dispatches into one compute pass (or, when profiling, one pass per
 * dispatch with timestamps). Working on the backend's device lets kernels read the model's weights where
 * tfjs keeps them, with no copy.
 */
import { tf } from "../../tf.js";

/** The parts of tfjs-backend-webgpu 4.x's backend object used here (its own type needs its sources). */
interface WebGpuBackendLike {
  device: GPUDevice;
  queue: GPUQueue;
  commandEncoder: GPUCommandEncoder | null;
  tensorMap: { get(dataId: object): { resource: unknown } | undefined };
  uploadToGPU(dataId: object): void;
  endComputePassEncoder(): void;
  submitQueue(): void;
}

/** One kernel launch: a pipeline, the buffers of binding 0.., and a workgroup count. */
export interface Dispatch {
  label: string;
  pipeline: GPUComputePipeline;
  buffers: GPUBuffer[];
  groups: [number, number, number];
}

/** Largest workgroup count per dimension WebGPU guarantees; bigger launches fold into y. */
const MAX_GROUPS = 65535;

export class GpuContext {
  readonly device: GPUDevice;
  private readonly backend: WebGpuBackendLike;
  private readonly pipelines = new Map<string, GPUComputePipeline>();
  private readonly bindGroups = new Map<string, GPUBindGroup>();
  private readonly bufferIds = new WeakMap<GPUBuffer | GPUComputePipeline, number>();
  private nextId = 1;
  readonly timestamps: boolean;

  constructor() {
    if (tf.getBackend() !== "webgpu") throw new Error("the WebGPU step runner needs the webgpu backend to be active");
    this.backend = tf.backend() as unknown as WebGpuBackendLike;
    this.device = this.backend.device;
    this.timestamps = this.device.features.has("timestamp-query");
  }

  /** The GPUBuffer holding a tensor's values, uploading it first if tfjs still keeps it on the CPU. */
  bufferOf(t: tf.Tensor): GPUBuffer {
    const dataId = t.dataId as object;
    this.backend.uploadToGPU(dataId);
    const r = this.backend.tensorMap.get(dataId)?.resource;
    if (!(r instanceof GPUBuffer)) throw new Error("tensor has no GPU buffer (disposed, or stored as a texture)");
    return r;
  }

  /**
   * Submits what tfjs has recorded but not yet sent (uploads, weight updates), so work encoded here after
   * it sees those writes: the queue runs submissions in order.
   */
  flushTfjs(): void {
    this.backend.endComputePassEncoder();
    if (this.backend.commandEncoder) this.backend.submitQueue();
  }

  buffer(bytes: number, usage: number = GPUBufferUsage.STORAGE | GPUBufferUsage.COPY_SRC | GPUBufferUsage.COPY_DST): GPUBuffer {
    // a binding must be non-empty and 4-byte aligned
    return this.device.createBuffer({ size: Math.max(16, Math.ceil(bytes / 16) * 16), usage });
  }

  /** The compute pipeline of a WGSL source (entry point `main`), compiled once. */
  pipeline(code: string): GPUComputePipeline {
    let p = this.pipelines.get(code);
    if (!p) {
      const module = this.device.createShaderModule({ code });
      p = this.device.createComputePipeline({ layout: "auto", compute: { module, entryPoint: "main" } });
      this.pipelines.set(code, p);
    }
    return p;
  }

  private idOf(o: GPUBuffer | GPUComputePipeline): number {
    let id = this.bufferIds.get(o);
    if (id === undefined) {
      id = this.nextId++;
      this.bufferIds.set(o, id);
    }
    return id;
  }

  /**
   * The bind group of `buffers` at bindings 0.. for a pipeline, cached by buffer identity: tfjs may hand a
   * variable a new buffer between calls (an optimizer step), which then simply keys a new group.
   */
  bindGroup(pipeline: GPUComputePipeline, buffers: GPUBuffer[]): GPUBindGroup {
    let key = String(this.idOf(pipeline));
    for (const b of buffers) key += "," + this.idOf(b);
    let g = this.bindGroups.get(key);
    if (!g) {
      // buffers freed by tfjs stay referenced by stale groups; a bound on the cache keeps that finite
      if (this.bindGroups.size > 20000) this.bindGroups.clear();
      g = this.device.createBindGroup({ layout: pipeline.getBindGroupLayout(0), entries: buffers.map((buffer, binding) => ({ binding, resource: { buffer } })) });
      this.bindGroups.set(key, g);
    }
    return g;
  }

  /** Workgroup counts for n workgroups, folded into two dimensions past the per-dimension limit. */
  static groups1d(n: number): [number, number, number] {
    if (n <= MAX_GROUPS) return [Math.max(1, n), 1, 1];
    return [MAX_GROUPS, Math.ceil(n / MAX_GROUPS), 1];
  }

  /**
   * Encodes the dispatches in order. Consecutive dispatches in one compute pass are separate usage scopes,
   * so each sees the writes of the ones before it. With `profile`, every dispatch gets its own pass with
   * begin/end timestamps, and the per-label GPU times (ms) are returned by `readProfile`.
   */
  encode(encoder: GPUCommandEncoder, list: Dispatch[], profile: Profiler | null = null): void {
    if (!profile) {
      const pass = encoder.beginComputePass();
      for (const d of list) {
        pass.setPipeline(d.pipeline);
        pass.setBindGroup(0, this.bindGroup(d.pipeline, d.buffers));
        pass.dispatchWorkgroups(d.groups[0], d.groups[1], d.groups[2]);
      }
      pass.end();
      return;
    }
    for (const d of list) {
      const i = profile.next(d.label);
      const pass = i < 0 ? encoder.beginComputePass() : encoder.beginComputePass({ timestampWrites: { querySet: profile.querySet, beginningOfPassWriteIndex: 2 * i, endOfPassWriteIndex: 2 * i + 1 } });
      pass.setPipeline(d.pipeline);
      pass.setBindGroup(0, this.bindGroup(d.pipeline, d.buffers));
      pass.dispatchWorkgroups(d.groups[0], d.groups[1], d.groups[2]);
      pass.end();
    }
  }

  /** Copies `bytes` of `src` to a mappable buffer in `encoder`; the returned promise resolves after submit. */
  readBack(encoder: GPUCommandEncoder, src: GPUBuffer, bytes: number): () => Promise<ArrayBuffer> {
    const size = Math.ceil(bytes / 4) * 4;
    const staging = this.device.createBuffer({ size, usage: GPUBufferUsage.COPY_DST | GPUBufferUsage.MAP_READ });
    encoder.copyBufferToBuffer(src, 0, staging, 0, size);
    return async () => {
      await staging.mapAsync(GPUMapMode.READ);
      const out = staging.getMappedRange().slice(0);
      staging.unmap();
      staging.destroy();
      return out;
    };
  }
}

/** Timestamp queries for one profiled run: a begin/end pair per dispatch, summed by label. */
export class Profiler {
  readonly querySet: GPUQuerySet;
  private readonly labels: string[] = [];
  private readonly capacity: number;
  constructor(private readonly ctx: GpuContext, dispatches = 2048) {
    this.capacity = dispatches;
    this.querySet = ctx.device.createQuerySet({ type: "timestamp", count: 2 * dispatches });
  }
  /** The query pair index for the next dispatch, or -1 once the set is full (that dispatch goes untimed). */
  next(label: string): number {
    if (this.labels.length >= this.capacity) return -1;
    this.labels.push(label);
    return this.labels.length - 1;
  }
  /** Resolves the queries in `encoder`; call the result after submitting to get ms per label. */
  resolve(encoder: GPUCommandEncoder): () => Promise<Map<string, { ms: number; count: number }>> {
    const n = Math.max(1, this.labels.length) * 2;
    const resolved = this.ctx.buffer(n * 8, GPUBufferUsage.QUERY_RESOLVE | GPUBufferUsage.COPY_SRC);
    encoder.resolveQuerySet(this.querySet, 0, n, resolved, 0);
    const read = this.ctx.readBack(encoder, resolved, n * 8);
    return async () => {
      const t = new BigUint64Array(await read());
      const out = new Map<string, { ms: number; count: number }>();
      this.labels.forEach((label, i) => {
        const ms = Number(t[2 * i + 1] - t[2 * i]) / 1e6;
        const e = out.get(label) ?? { ms: 0, count: 0 };
        e.ms += ms;
        e.count += 1;
        out.set(label, e);
      });
      resolved.destroy();
      this.querySet.destroy();
      return out;
    };
  }
}
