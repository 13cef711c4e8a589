import { test } from "node:test";
import assert from "node:assert/strict";
import { mean, passAt1, passAtK, passPowK, sampleSd } from "../../lib/stats/estimators.js";
import { isT2sError } from "../../lib/core/errors.js";

/** C(n, k) exactly. */
function binom(n: number, k: number): bigint {
  if (k < 0 || k > n) return 0n;
  let r = 1n;
  for (let i = 0; i < k; i++) r = (r * BigInt(n - i)) / BigInt(i + 1);
  return r;
}

/** num/den as a double, exact to the last bit or so even for huge integers. */
function ratio(num: bigint, den: bigint): number {
  const scale = 10n ** 30n;
  return Number((num * scale) / den) / 1e30;
}

const close = (a: number, b: number, tol = 1e-12) => assert.ok(Math.abs(a - b) <= tol, `${a} != ${b}`);

test("pass@k and pass^k match hand-computed values", () => {
  close(passAtK(5, 2, 2), 1 - 3 / 10); // 1 - C(3,2)/C(5,2)
  close(passPowK(5, 2, 2), 1 / 10); // C(2,2)/C(5,2)
  close(passAtK(10, 3, 3), 1 - 35 / 120); // 1 - C(7,3)/C(10,3)
  close(passPowK(10, 3, 3), 1 / 120);
  close(passAtK(4, 1, 2), 1 - 3 / 6);
  close(passPowK(4, 3, 2), 3 / 6);
  close(passAtK(4, 2, 1), 0.5);
  close(passPowK(4, 2, 1), 0.5);
  close(passAt1(8, 3), 3 / 8);
});

test("n = k: pass@k is 1 if any sample is right, pass^k is 1 only if all are", () => {
  assert.equal(passAtK(4, 0, 4), 0);
  assert.equal(passAtK(4, 1, 4), 1);
  assert.equal(passAtK(4, 4, 4), 1);
  assert.equal(passPowK(4, 3, 4), 0);
  assert.equal(passPowK(4, 4, 4), 1);
  close(passPowK(1, 1, 1), 1);
});

test("c = 0 and c = n are 0 and 1 for every k", () => {
  for (const n of [1, 2, 7, 50]) {
    for (let k = 1; k <= n; k++) {
      assert.equal(passAtK(n, 0, k), 0);
      assert.equal(passPowK(n, 0, k), 0);
      assert.equal(passAtK(n, n, k), 1);
      close(passPowK(n, n, k), 1);
    }
  }
});

test("n = 200 agrees with exact big-integer binomials, without overflow", () => {
  for (const [n, c, k] of [
    [200, 37, 50],
    [200, 3, 100],
    [200, 199, 150],
    [200, 120, 10],
    [1000, 400, 500],
  ]) {
    const pk = passAtK(n, c, k);
    const wk = passPowK(n, c, k);
    assert.ok(Number.isFinite(pk) && Number.isFinite(wk));
    close(pk, 1 - ratio(binom(n - c, k), binom(n, k)), 1e-12);
    close(wk, ratio(binom(c, k), binom(n, k)), 1e-12);
  }
  // C(200, 100) ~ 9e58 would overflow naive factorials; the product form stays exact
  close(passPowK(200, 150, 100), ratio(binom(150, 100), binom(200, 100)), 1e-15);
});

test("bad counts are rejected", () => {
  assert.throws(() => passAtK(3, 4, 1), (e) => isT2sError(e, "bad_counts"));
  assert.throws(() => passAtK(3, 1, 4), (e) => isT2sError(e, "bad_counts"));
  assert.throws(() => passPowK(0, 0, 1), (e) => isT2sError(e, "bad_counts"));
});

test("mean and sample sd", () => {
  assert.equal(mean([]), null);
  assert.equal(mean([1, 2, 3]), 2);
  assert.equal(sampleSd([1]), null);
  close(sampleSd([1, 2, 3, 4]) as number, Math.sqrt(5 / 3));
});
