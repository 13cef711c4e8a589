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

const requestedKeys = new WeakMap<BufferPoolLike, Set<string>>();

/** The pool's budget in bytes: T2S_GPU_POOL_MB, or 24 GiB. */
export function poolBudgetBytes(env: NodeJS.ProcessEnv = process.env): number {
  const raw = env.T2S_GPU_POOL_MB;
  const mb = raw === undefined || raw === "" ? 24576 : Number(raw);
  if (!Number.isFinite(mb) || mb < 0) throw new Error(`T2S_GPU_POOL_MB must be a number of MiB >= 0, got '${raw}'`);
  return mb * 1024 * 1024;
}

/** Starts recording the sizes the pool is asked for (idempotent); the pool keys buffers as `${size}_${usage}`. */
export function watchPool(pool: BufferPoolLike): void {
  if (requestedKeys.has(pool)) return;
  const keys = new Set<string>();
  requestedKeys.set(pool, keys);
  const acquire = pool.acquireBuffer.bind(pool);
  pool.acquireBuffer = (size: number, usage: number, ...rest: unknown[]) => {
    keys.add(`${size}_${usage}`);
    return acquire(size, usage, ...rest);
  };
}

/**
 * Destroys free buffers of sizes not requested since the last trim (all of them on the first call, before
 * anything was watched), then the largest ones until the free bytes fit `budgetBytes`. Returns the bytes
 * released. Keys stay in the map: the pool skips releases when the map is empty.
 */
export function trimPool(pool: BufferPoolLike, budgetBytes: number): number {
  // undefined on the first trim: nothing was watched yet, so nothing counts as asked for
  const requested = requestedKeys.get(pool);
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

/**
 * Trims the WebGPU backend's pool of freed buffers after a training step (see above): sizes the step
 * did not ask for are destroyed, the rest kept up to T2S_GPU_POOL_MB. No-op on other backends.
 */
export function trimGpuBufferPool(): void {
  if (tf.getBackend() !== "webgpu") return;
  const pool = (tf.backend() as unknown as { bufferManager?: BufferPoolLike }).bufferManager;
  if (!pool?.freeBuffers) return;
  trimPool(pool, poolBudgetBytes());
}
