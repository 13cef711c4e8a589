import { test } from "node:test";
import assert from "node:assert/strict";
import { DedupIndex, findDuplicates, sqlDuplicateKey, questionOverlap, questionWords } from "../../lib/tasks/dedup.js";
import { SeededRandom } from "../../lib/core/random.js";

test("normalised SQL ignores case, spacing, comments and the trailing semicolon", () => {
  assert.equal(sqlDuplicateKey("SELECT  a ,b\nFROM t -- hi\n WHERE x = 1 ;"), sqlDuplicateKey("select a, b from t where x=1"));
  assert.notEqual(sqlDuplicateKey("select a from t"), sqlDuplicateKey("select b from t"));
});

test("overlap is the Jaccard index of [a-z0-9]+ word sets", () => {
  assert.deepEqual(questionWords("How many, how MANY orders?"), ["how", "many", "orders"]);
  assert.equal(questionOverlap("a b c d", "a b c e"), 3 / 5);
  assert.equal(questionOverlap("a b c d", "d c b a"), 1);
  assert.equal(questionOverlap("a b", "c d"), 0);
});

test("the index flags duplicate SQL and questions above 0.75 only", () => {
  const ix = new DedupIndex();
  assert.equal(ix.tryAdd("1", "one two three four five six seven eight", "select 1"), null);
  assert.equal(ix.tryAdd("2", "something else entirely", "SELECT 1;")?.kind, "sql");
  // 7 of 9 shared: 7/9 = 0.78 > 0.75
  const hit = ix.tryAdd("3", "one two three four five six seven nine", "select 3");
  assert.equal(hit?.kind, "question");
  assert.equal(hit?.other, "1");
  // 6 shared of 8 distinct: exactly 0.75 is not a duplicate
  assert.equal(ix.check("one two three four five six x y"), null);
  assert.equal(ix.size, 1);
});

test("the prefix-filtered index agrees with comparing every pair", () => {
  const rng = new SeededRandom(3);
  const vocab = Array.from({ length: 40 }, (_, i) => `w${i}`);
  const bases = Array.from({ length: 60 }, () => Array.from({ length: 5 + Math.floor(rng.next() * 10) }, () => rng.pick(vocab)));
  // mutate bases by replacing a few words, so that some pairs land on each side of the threshold
  const qs = Array.from({ length: 400 }, () => {
    const words = rng.pick(bases).slice();
    const swaps = Math.floor(rng.next() * 4);
    for (let s = 0; s < swaps; s++) words[Math.floor(rng.next() * words.length)] = rng.pick(vocab);
    return words.join(" ");
  });
  const tasks = qs.map((q, i) => ({ id: String(i), question: q, gold_sql: `select ${i}` }));
  const fast = findDuplicates(tasks).filter((p) => p.kind === "question").map((p) => `${p.a}-${p.b}`).sort();
  const slow: string[] = [];
  for (let j = 0; j < qs.length; j++) for (let i = 0; i < j; i++) if (questionOverlap(qs[i], qs[j]) > 0.75) slow.push(`${i}-${j}`);
  slow.sort();
  assert.ok(slow.length > 50 && slow.length < 70000, "the random set must contain some duplicates");
  assert.deepEqual(fast, slow);
});
