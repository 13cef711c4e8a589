import { test } from "node:test";
import assert from "node:assert/strict";
import { type BufferPoolLike, type PooledBuffer, poolBudgetBytes, trimPool, watchPool } from "../../lib/backend/gpu-pool.js";

/**
 * A pool with tfjs-backend-webgpu's BufferManager bookkeeping (free lists keyed `${size}_${usage}`), for the
 * policy alone: the real one needs a GPU device.
 */
class FakePool implements BufferPoolLike {
  freeBuffers = new Map<string, PooledBuffer[]>();
  numFreeBuffers = 0;
  numBytesAllocated = 0;
  destroyed: number[] = [];
  acquireBuffer(size: number, usage: number): PooledBuffer {
    const list = this.freeBuffers.get(`${size}_${usage}`) ?? [];
    this.freeBuffers.set(`${size}_${usage}`, list);
    const reused = list.pop();
    if (reused) {
      this.numFreeBuffers -= 1;
      return reused;
    }
    this.numBytesAllocated += size;
    return { size, destroy: () => this.destroyed.push(size) };
  }
  release(b: PooledBuffer, usage = 1): void {
    this.freeBuffers.get(`${b.size}_${usage}`)!.push(b);
    this.numFreeBuffers += 1;
  }
  freeSizes(): number[] {
    return [...this.freeBuffers.values()].flat().map((b) => b.size).sort((a, b) => a - b);
  }
}

/** One "step": acquire buffers of these sizes, then free them all. */
function step(pool: FakePool, sizes: number[]): void {
  const held = sizes.map((s) => pool.acquireBuffer(s, 1) as PooledBuffer);
  held.forEach((b) => pool.release(b));
}

test("the first trim empties the pool; later trims keep the sizes the last step asked for", () => {
  const pool = new FakePool();
  step(pool, [100, 200]);
  assert.equal(trimPool(pool, 1e9), 300, "before watching, everything goes (as the pool was never observed)");
  assert.deepEqual(pool.freeSizes(), []);
  step(pool, [100, 200, 200]);
  assert.equal(trimPool(pool, 1e9), 0);
  assert.deepEqual(pool.freeSizes(), [100, 200, 200], "sizes asked for are kept for the next step");
  const before = pool.numBytesAllocated;
  step(pool, [100, 200, 200]);
  assert.equal(pool.numBytesAllocated, before, "the next step with the same shapes creates nothing");
  step(pool, [300]);
  trimPool(pool, 1e9);
  assert.deepEqual(pool.freeSizes(), [100, 200, 200, 300], "everything asked for since the last trim stays");
  step(pool, [300]);
  trimPool(pool, 1e9);
  assert.deepEqual(pool.freeSizes(), [300], "sizes of an earlier step that did not come back are destroyed");
  assert.equal(pool.numFreeBuffers, 1);
  assert.equal(pool.numBytesAllocated, 300);
});

test("over the byte budget the largest free buffers go first", () => {
  const pool = new FakePool();
  watchPool(pool);
  step(pool, [500, 400, 50, 10]);
  const released = trimPool(pool, 100);
  assert.equal(released, 900);
  assert.deepEqual(pool.freeSizes(), [10, 50]);
  assert.deepEqual(pool.destroyed.sort((a, b) => a - b), [400, 500]);
  assert.equal(pool.numFreeBuffers, 2);
});

test("T2S_GPU_POOL_MB sets the budget and a bad value is named", () => {
  assert.equal(poolBudgetBytes({}), 24576 * 1024 * 1024);
  assert.equal(poolBudgetBytes({ T2S_GPU_POOL_MB: "0" }), 0);
  assert.throws(() => poolBudgetBytes({ T2S_GPU_POOL_MB: "lots" }), /T2S_GPU_POOL_MB/);
});
