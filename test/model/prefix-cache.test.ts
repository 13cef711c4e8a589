/**
 * The prefix cache's shared part (lib/model/engine/prefix-cache.ts): chained block hashes, the index's
 * longest match, least-recently-used eviction that spares pinned entries, taking over an entry a longer
 * prompt extends, and the prefill plan (phases, copies from the cache and from earlier rows of the call).
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { blockHashes, planPrefill, PREFIX_BLOCK_TOKENS, PrefixCacheIndex, prefixCacheSlots, unpinPlans } from "../../lib/model/engine/prefix-cache.js";

const B = PREFIX_BLOCK_TOKENS;
const seq = (n: number, from = 0): number[] => Array.from({ length: n }, (_, i) => (from + i * 7) % 1000);

test("block hashes are chained: equal at block i exactly when the prompts agree up to its end; the salt separates chains", () => {
  const a = seq(3 * B);
  const b = a.slice();
  b[2 * B + 3] = 999;
  const c = a.slice();
  c[0] = 998;
  const ha = blockHashes(a, 3);
  const hb = blockHashes(b, 3);
  const hc = blockHashes(c, 3);
  assert.equal(ha.length, 3);
  assert.deepEqual(hb.slice(0, 2), ha.slice(0, 2));
  assert.notEqual(hb[2], ha[2]);
  // the same last block after a different first one is another prefix
  assert.ok(hc.every((h, i) => h !== ha[i]));
  assert.notEqual(blockHashes(a, 1, "5")[0], ha[0]);
  assert.deepEqual(blockHashes(a, 2), ha.slice(0, 2));
});

test("the index finds the longest stored prefix, evicts the least recently used unpinned entry, and extends in place", () => {
  const freed: string[] = [];
  const index = new PrefixCacheIndex<string>(2, (v) => freed.push(v));
  const sys = seq(2 * B);
  const p1 = blockHashes([...sys, ...seq(B, 1)], 3);
  const p2 = blockHashes([...sys, ...seq(B, 2)], 3);
  const p3 = blockHashes([...sys, ...seq(B, 3)], 3);
  assert.equal(index.longest(p1), null);
  assert.equal(index.reserve(p1, 1, () => "one")?.reused, false);
  // the cache holds all of p1: nothing to store
  assert.equal(index.reserve(p1, 1, () => "again"), null);
  assert.equal(index.reserve(p2, 1, () => "two")?.reused, false);
  // p3 shares the system part (two blocks) with both
  assert.equal(index.longest(p3)?.blocks, 2);
  // "one" was used last by that lookup or not: touch "two", pin it, and a third entry evicts "one"
  const hit2 = index.longest(p2)!;
  assert.equal(hit2.entry.value, "two");
  index.pin(hit2.entry);
  assert.equal(index.reserve(p3, 1, () => "three")?.entry.value, "three");
  assert.deepEqual(freed, ["one"]);
  assert.equal(index.longest(p1)?.blocks, 2, "p1's system part is still found in another entry");
  // both left are pinned or new: pin "three" too and nothing can be stored
  index.pin(index.longest(p3)!.entry);
  assert.equal(index.reserve(p1, 1, () => "four"), null);
  index.unpin(hit2.entry);
  // a prompt that extends "two" by a block takes it over (same storage, longer chain)
  const longer = blockHashes([...sys, ...seq(B, 2), ...seq(B, 9)], 4);
  const got = index.reserve(longer, 1, () => "five");
  assert.equal(got?.reused, true);
  assert.equal(got?.entry.value, "two");
  assert.equal(index.longest(longer)?.blocks, 4);
  assert.equal(index.size, 2);
  const pinned = index.longest(p3)!.entry;
  index.clear();
  assert.equal(index.size, 0);
  assert.equal(index.longest(p3), null, "a cleared entry is not found, pinned or not");
  assert.ok(!freed.includes("three"), "a pinned entry's storage is kept until its copies are made");
  index.unpin(pinned);
  assert.ok(freed.includes("three"));
  assert.equal(index.reserve(p1, 3, () => "too big"), null);
  assert.equal(prefixCacheSlots(0, 2048), 0);
  assert.equal(prefixCacheSlots(1, 2048), 1);
  assert.equal(prefixCacheSlots(16384, 2048), 8);
});

test("a plan copies the longest prefix from the cache or an earlier row of the call, never a row's last token", () => {
  const index = new PrefixCacheIndex<number>(4, () => undefined);
  const sys = seq(2 * B);
  const stored = [...sys, ...seq(B, 1)];
  index.reserve(blockHashes(stored, 3), 1, () => 100);
  const rows = [
    // the stored prompt again: all but its last block (the last token is sampled)
    { ids: stored, salt: "", minStart: 0, declared: 0 },
    // the system part and a new question: the cache gives the system part
    { ids: [...sys, ...seq(2 * B, 5)], salt: "", minStart: 0, declared: 0 },
    // the same new question again: row 1 computes three more blocks in phase 1, this row copies them in phase 2
    { ids: [...sys, ...seq(2 * B, 5), 4], salt: "", minStart: 0, declared: 0 },
    // another salt finds nothing
    { ids: stored, salt: "x", minStart: 0, declared: 0 },
    // a declared shared prefix of 20 tokens, handed over by the row of the same salt and prefix
    { ids: [...seq(20, 3), 1, 2], salt: "d", minStart: 0, declared: 20 },
    { ids: [...seq(20, 3), 5], salt: "d", minStart: 0, declared: 20 },
  ];
  const plans = planPrefill(rows, index);
  assert.deepEqual(plans.map((p) => [p.phase, p.start]), [[1, 2 * B], [1, 2 * B], [2, 4 * B], [1, 0], [1, 0], [2, 20]]);
  assert.deepEqual(plans[2].from, { row: 1 });
  assert.deepEqual(plans[5].from, { row: 4 });
  const entry = index.longest(blockHashes(stored, 3))!.entry;
  assert.equal(entry.pins, 2, "the two rows that copy from it pin it");
  unpinPlans(plans, index);
  assert.equal(entry.pins, 0);
  // a row may not start before its shared part (the CPU runner's minStart)
  const cpu = planPrefill([{ ids: stored, salt: "", minStart: 40, declared: 0 }], index);
  assert.equal(cpu[0].start, 40);
  assert.equal(cpu[0].from, null);
  unpinPlans(cpu, index);
  // caching off: only declared prefixes move within the call, and nothing is hashed
  const off = planPrefill(rows, null);
  assert.deepEqual(off.map((p) => [p.phase, p.start]), [[1, 0], [1, 0], [1, 0], [1, 0], [1, 0], [2, 20]]);
  assert.ok(off.every((p) => p.hashes.length === 0));
});
