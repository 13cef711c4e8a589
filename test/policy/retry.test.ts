import { test } from "node:test";
import assert from "node:assert/strict";
import { backoffDelay, withRetries } from "../../lib/policy/retry.js";
import { Limiter } from "../../lib/policy/limiter.js";
import { PolicyError } from "../../lib/policy/types.js";

test("backoff doubles, is capped, and its jitter is deterministic in [0.5, 1) of the raw delay", () => {
  const d = [1, 2, 3, 4].map((a) => backoffDelay(a, { baseMs: 100, maxMs: 500, jitterKey: "x" }));
  assert.deepEqual(d, [1, 2, 3, 4].map((a) => backoffDelay(a, { baseMs: 100, maxMs: 500, jitterKey: "x" })));
  const raw = [100, 200, 400, 500];
  d.forEach((v, i) => assert.ok(v >= raw[i] * 0.5 && v < raw[i], `${v} vs ${raw[i]}`));
  assert.notEqual(backoffDelay(1, { jitterKey: "a" }), backoffDelay(1, { jitterKey: "b" }));
});

test("withRetries retries only retryable PolicyErrors", async () => {
  let n = 0;
  const got = await withRetries(async () => {
    if (n++ < 2) throw new PolicyError("http_500", "boom", { retryable: true });
    return "ok";
  }, { baseMs: 1 });
  assert.equal(got, "ok");
  assert.equal(n, 3);
  let m = 0;
  await assert.rejects(withRetries(async () => {
    m++;
    throw new PolicyError("http_400", "bad");
  }, { baseMs: 1 }), /bad/);
  assert.equal(m, 1);
});

test("Limiter never runs more than its limit", async () => {
  const lim = new Limiter(2);
  let peak = 0;
  const jobs = Array.from({ length: 6 }, () => lim.run(async () => {
    peak = Math.max(peak, lim.running);
    await new Promise((r) => setImmediate(r));
  }));
  await Promise.all(jobs);
  assert.equal(peak, 2);
});
