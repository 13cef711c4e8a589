import { test } from "node:test";
import assert from "node:assert/strict";
import { type BufferPoolLike, type PooledBuffer, poolBudgetBytes, roundPoolRequests, sizeClass, trimPool, watchPool } from "../../lib/backend/gpu-pool.js";
import { useBackend } from "../../lib/backend/select.js";
import { tf } from "../../lib/backend/tf.js";

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

test("size classes: quarter powers of two, never smaller than asked, bindable sizes stay bindable", () => {
  assert.equal(sizeClass(1), 256);
  assert.equal(sizeClass(1024), 1024);
  assert.equal(sizeClass(1025), 1220);
  for (let b = 200; b < 5e9; b = Math.ceil(b * 1.37) + 3) {
    const c = sizeClass(b);
    assert.ok(c >= b && c % 4 === 0, `class ${c} of ${b}`);
    assert.ok(c <= Math.max(256, b * 1.19 + 4), `class ${c} of ${b} wastes more than 19%`);
    if (b <= 2 ** 31 - 4) assert.ok(c <= 2 ** 31 - 4, `class ${c} of a bindable ${b}`);
  }
  // micro-batches a few percent apart share one class
  assert.equal(sizeClass(64 * 410 * 1024), sizeClass(64 * 430 * 1024));
});

test("a rounded pool hands a freed buffer to a request of another size in the same class", () => {
  const pool = new FakePool();
  roundPoolRequests(pool);
  roundPoolRequests(pool);
  const a = pool.acquireBuffer(64 * 410 * 1024, 1) as PooledBuffer;
  assert.equal(a.size, sizeClass(64 * 410 * 1024));
  pool.release(a);
  const b = pool.acquireBuffer(64 * 430 * 1024, 1) as PooledBuffer;
  assert.equal(b, a, "the second request reuses the first buffer");
  assert.equal(pool.numBytesAllocated, a.size);
});

test("on WebGPU, tensors in rounded buffers read back at their own length", async (t) => {
  try {
    await useBackend("webgpu");
  } catch (e) {
    t.skip(`no WebGPU adapter: ${(e as Error).message}`);
    return;
  }
  try {
    const x = tf.range(0, 1000, 1, "float32");
    const y = tf.add(x, 1);
    const v = await y.data();
    assert.equal(v.length, 1000);
    assert.equal(v[999], 1000);
    assert.equal((await y.data()).length, 1000, "the cached copy is cut too");
    tf.dispose([x, y]);
  } finally {
    await useBackend("cpu");
  }
});

test("a rounded, watched pool keeps the classes the last step asked for across trims", () => {
  const pool = new FakePool();
  roundPoolRequests(pool);
  trimPool(pool, 1e12);
  step(pool, [64 * 410 * 1024, 5000]);
  trimPool(pool, 1e12);
  const allocated = pool.numBytesAllocated;
  // the next micro-batch is a little longer: same classes, so nothing is destroyed or created
  step(pool, [64 * 430 * 1024, 5100]);
  assert.equal(trimPool(pool, 1e12), 0);
  assert.deepEqual(pool.destroyed, []);
  assert.equal(pool.numBytesAllocated, allocated);
});
