/**
 * What the WebGPU backend's buffer pool keeps between training steps.
 *
 * tfjs-backend-webgpu pools freed buffers by exact byte size and never lets them go. Reusing them matters:
 * a Dawn createBuffer (and the zeroing of a fresh buffer) cost about a second of a 0.5B training step when
 * the pool was emptied after every step. Keeping everything does not work either: the lengths of SFT and
 * GRPO micro-batches change from step to step, so the pool would collect every size ever seen until the
 * device runs out of memory. The policy here: after each step, destroy the free buffers of sizes nobody
 * asked for since the previous trim, then the largest free buffers until the pool holds at most a byte
 * budget (T2S_GPU_POOL_MB, default 24576). A step's activations of a 0.5B model at B4 x T512 are over
 * 10 GB, so a smaller budget drops the big ones and the next step creates them again. Between steps the
 * pool holds no more than the buffers the last step freed and no more than the budget; when step lengths
 * change, the next step's new sizes come on top of that, so on a GPU with little memory lower the budget.
 *
 * Size classes: the pool matches sizes exactly, and a GRPO step's micro-batches differ in length, so each
 * micro-batch asked for sizes the previous one never freed and Dawn created every activation buffer again
 * (a V8 profile of the default model's round-1 update on the H200: createBuffer 20% of the host's time).
 * With `usePoolSizeClasses` every request is rounded up to a quarter power of two (at most 19% more
 * bytes), so micro-batches of similar lengths share buffers. A buffer can then be larger than its tensor;
 * tfjs reads a tensor back by copying its whole buffer, so reads are cut back to the tensor's length.
 */
import { tf } from "./tf.js";

export interface PooledBuffer {
  size: number;
  destroy(): void;
}

/** The fields of tfjs-backend-webgpu's BufferManager this policy reads and updates. */
export interface BufferPoolLike {
  freeBuffers: Map<string, PooledBuffer[]>;
  numFreeBuffers: number;
  numBytesAllocated: number;
  acquireBuffer(size: number, usage: number, ...rest: unknown[]): unknown;
}

/**
 * What the kit adds to a pool, through one wrapper of its acquireBuffer: whether requests are rounded to
 * size classes, and (once watched) the keys `${size}_${usage}` the pool filed requests under since the
 * last trim.
 */
interface PoolState {
  round: boolean;
  keys: Set<string> | null;
}

const states = new WeakMap<BufferPoolLike, PoolState>();

function instrument(pool: BufferPoolLike): PoolState {
  const known = states.get(pool);
  if (known) return known;
  const state: PoolState = { round: false, keys: null };
  states.set(pool, state);
  const acquire = pool.acquireBuffer.bind(pool);
  pool.acquireBuffer = (size: number, usage: number, ...rest: unknown[]) => {
    const filed = state.round ? sizeClass(size) : size;
    state.keys?.add(`${filed}_${usage}`);
    return acquire(filed, usage, ...rest);
  };
  return state;
}

/** Smallest buffer handed out (bytes); below it requests round up to a power of two. */
const MIN_CLASS_BYTES = 256;
/** WebGPU's default maxStorageBufferBindingSize: no kernel can read a larger buffer whole. */
export const MAX_BINDING_BYTES = 2 ** 31 - 4;

/** The size class of a request: the next quarter power of two (256 B at least), a multiple of 4 bytes. */
export function sizeClass(bytes: number): number {
  if (bytes <= MIN_CLASS_BYTES) return MIN_CLASS_BYTES;
  const e = Math.ceil(4 * Math.log2(bytes) - 1e-9) / 4;
  const c = Math.ceil(2 ** e / 4) * 4;
  const up = c >= bytes ? c : Math.ceil(2 ** (e + 0.25) / 4) * 4;
  // a buffer WebGPU could bind must stay bindable
  return up > MAX_BINDING_BYTES && bytes <= MAX_BINDING_BYTES ? Math.ceil(bytes / 4) * 4 : up;
}

/** Rounds every request of this pool up to its size class (idempotent). */
export function roundPoolRequests(pool: BufferPoolLike): void {
  instrument(pool).round = true;
}

/** The pool's budget in bytes: T2S_GPU_POOL_MB, or 24 GiB. */
export function poolBudgetBytes(env: NodeJS.ProcessEnv = process.env): number {
  const raw = env.T2S_GPU_POOL_MB;
  const mb = raw === undefined || raw === "" ? 24576 : Number(raw);
  if (!Number.isFinite(mb) || mb < 0) throw new Error(`T2S_GPU_POOL_MB must be a number of MiB >= 0, got '${raw}'`);
  return mb * 1024 * 1024;
}

/** Starts recording the sizes the pool is asked for (idempotent); the pool keys buffers as `${size}_${usage}`. */
export function watchPool(pool: BufferPoolLike): void {
  instrument(pool).keys ??= new Set<string>();
}

/**
 * Destroys free buffers of sizes not requested since the last trim (all of them on the first call, before
 * anything was watched), then the largest ones until the free bytes fit `budgetBytes`. Returns the bytes
 * released. Keys stay in the map: the pool skips releases when the map is empty.
 */
export function trimPool(pool: BufferPoolLike, budgetBytes: number): number {
  // undefined on the first trim: nothing was watched yet, so nothing counts as asked for
  const requested = states.get(pool)?.keys ?? undefined;
  watchPool(pool);
  let released = 0;
  const destroy = (b: PooledBuffer) => {
    b.destroy();
    released += b.size;
    pool.numBytesAllocated -= b.size;
    pool.numFreeBuffers -= 1;
  };
  const kept: { key: string; buffer: PooledBuffer }[] = [];
  for (const [key, list] of pool.freeBuffers) {
    if (requested?.has(key)) for (const buffer of list) kept.push({ key, buffer });
    else list.forEach(destroy);
    list.length = 0;
  }
  // largest first: the fewest destroy/create pairs for the bytes given back
  kept.sort((a, b) => b.buffer.size - a.buffer.size);
  let freeBytes = kept.reduce((s, k) => s + k.buffer.size, 0);
  for (const k of kept) {
    if (freeBytes > budgetBytes) {
      freeBytes -= k.buffer.size;
      destroy(k.buffer);
    } else pool.freeBuffers.get(k.key)!.push(k.buffer);
  }
  requested?.clear();
  return released;
}

interface ReadableBackend {
  bufferManager?: BufferPoolLike;
  read(dataId: object): Promise<unknown>;
  tensorMap: { get(dataId: object): { shape: number[]; dtype: string; values: unknown } | undefined };
}

let classesOn = false;

/**
 * Puts the WebGPU backend's pool on size classes (see above), and cuts read-backs to the tensor's length.
 * Called once when the webgpu backend starts; T2S_GPU_POOL_CLASSES=0 keeps exact sizes.
 */
export function usePoolSizeClasses(): void {
  if (classesOn || process.env.T2S_GPU_POOL_CLASSES === "0" || tf.getBackend() !== "webgpu") return;
  const backend = tf.backend() as unknown as ReadableBackend;
  if (!backend.bufferManager?.freeBuffers) return;
  classesOn = true;
  roundPoolRequests(backend.bufferManager);
  const read = backend.read.bind(backend);
  backend.read = async (dataId: object) => {
    const values = await read(dataId);
    const data = backend.tensorMap.get(dataId);
    if (!data || !ArrayBuffer.isView(values) || data.dtype === "complex64") return values;
    const n = tf.util.sizeFromShape(data.shape);
    const typed = values as unknown as Float32Array;
    if (typed.length <= n) return values;
    // tfjs caches what it read on the tensor: cache the cut copy, so later reads agree
    data.values = typed.slice(0, n);
    return data.values;
  };
}

/**
 * Trims the WebGPU backend's pool of freed buffers after a training step (see above): sizes the step
 * did not ask for are destroyed, the rest kept up to `budgetBytes` (default T2S_GPU_POOL_MB; a memory plan
 * passes less, and 0 empties the pool). No-op on other backends.
 */
export function trimGpuBufferPool(budgetBytes: number = poolBudgetBytes()): void {
  if (tf.getBackend() !== "webgpu") return;
  const pool = (tf.backend() as unknown as { bufferManager?: BufferPoolLike }).bufferManager;
  if (!pool?.freeBuffers) return;
  trimPool(pool, budgetBytes);
}
