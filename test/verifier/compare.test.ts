import { test } from "node:test";
import assert from "node:assert/strict";
import type { ExecSuccess, SqlValue } from "../../lib/db/types.js";
import { compareResults } from "../../lib/verifier/compare.js";

const res = (rows: SqlValue[][], columns?: string[], truncated = false): ExecSuccess => ({
  ok: true,
  columns: columns ?? (rows[0] ?? []).map((_, i) => `c${i}`),
  rows,
  elapsedMs: 0,
  truncated,
});
const same = (c: SqlValue[][], g: SqlValue[][], opts = {}) => compareResults(res(c), res(g), opts).match;

test("multiset rows: order free, duplicates count", () => {
  assert.equal(same([[1], [2], [2]], [[2], [1], [2]]), true);
  assert.equal(same([[1], [2]], [[1], [2], [2]]), false);
  assert.equal(same([[1], [1], [2]], [[1], [2], [2]]), false);
});

test("shapes: row and column counts; two empties match; one empty does not", () => {
  assert.equal(compareResults(res([], ["a"]), res([], ["a", "b"])).match, true);
  const r = compareResults(res([]), res([[1]]));
  assert.equal(r.match, false);
  assert.equal(r.reason, "result differs: got 0 rows x 0 cols, want 1 row x 1 col");
  assert.equal(compareResults(res([[1, 2]]), res([[1]])).reason, "result differs: got 1 row x 2 cols, want 1 row x 1 col");
  assert.equal(same([[1], [2], [3]], [[1], [2], [3], [4]]), false);
});

test("column order is free and names are ignored", () => {
  assert.equal(compareResults(res([["a", 1], ["b", 2]], ["x", "y"]), res([[2, "b"], [1, "a"]], ["p", "q"])).match, true);
  assert.equal(same([["a", 1], ["b", 2]], [[1, "b"], [2, "a"]]), false, "pairs within rows must survive");
  assert.equal(same([["a", 1]], [[1, "a"]], { columnOrder: "strict" }), false);
});

test("column permutations with duplicate and tied columns", () => {
  // two gold columns with identical values, and columns whose value multisets tie but pair differently
  assert.equal(same([[1, 1, "x"], [2, 2, "y"]], [["x", 1, 1], ["y", 2, 2]]), true);
  assert.equal(same([[1, 2], [2, 1]], [[2, 1], [1, 2]]), true);
  assert.equal(same([[1, 2, 1], [2, 1, 2]], [[1, 1, 2], [2, 2, 1]]), true);
  assert.equal(same([[1, 2, 2], [2, 1, 1]], [[1, 1, 2], [2, 2, 1]]), true, "rows pair up under some column order");
  assert.equal(same([[1, 1, 1], [2, 2, 2]], [[1, 1, 2], [2, 2, 1]]), false, "same column multisets, rows differ");
  assert.equal(same([[1, 1], [2, 2]], [[1, 2], [2, 1]]), false);
});

test("wide results with many same-signature columns stay fast and correct", () => {
  const n = 14;
  const rows = (perm: number[]) => [...Array(30).keys()].map((r) => perm.map((c) => (r * 7 + c * 3) % 5));
  const identity = [...Array(n).keys()];
  const shuffled = [...identity].reverse();
  const gold = rows(identity);
  const cand = gold.map((row) => shuffled.map((c) => row[c]));
  assert.equal(same(cand, gold), true);
  const broken = cand.map((row, r) => (r === 3 ? [...row.slice(0, -1), 9] : row));
  assert.equal(same(broken, gold), false);
  const dup = [...Array(20).keys()].map((r) => Array(12).fill(r % 3));
  assert.equal(same(dup, dup.slice().reverse()), true, "twelve identical columns");
});

test("order matters only with a top-level ORDER BY in the gold", () => {
  const g = [[1], [2], [3]];
  const c = [[3], [2], [1]];
  assert.equal(same(c, g, { goldSql: "SELECT a FROM t ORDER BY a" }), false);
  assert.equal(same(g, g, { goldSql: "SELECT a FROM t ORDER BY a" }), true);
  assert.equal(same(c, g, { goldSql: "SELECT * FROM (SELECT a FROM t ORDER BY a)" }), true);
  assert.equal(same(c, g, { goldSql: "SELECT a, row_number() OVER (ORDER BY a) FROM t" }), true);
  assert.equal(same(c, g, { goldSql: "SELECT a FROM (SELECT a FROM t ORDER BY a)", order: "anywhere" }), false);
  assert.equal(same(c, g, { order: "always" }), false);
  assert.equal(same(c, g, { goldSql: "SELECT a FROM t ORDER BY a", order: "ignore" }), true);
  const r = compareResults(res(c), res(g), { goldSql: "SELECT a FROM t ORDER BY a" });
  assert.match(r.reason, /different order/);
});

test("ties on the ORDER BY columns may come in any order; other rows may not", () => {
  const goldSql = "SELECT name, score FROM t ORDER BY score DESC";
  const gold = res([["a", 9], ["b", 7], ["c", 7], ["d", 5]], ["name", "score"]);
  const swapTie = res([["a", 9], ["c", 7], ["b", 7], ["d", 5]], ["name", "score"]);
  const swapOther = res([["b", 7], ["a", 9], ["c", 7], ["d", 5]], ["name", "score"]);
  assert.equal(compareResults(swapTie, gold, { goldSql }).match, true);
  assert.equal(compareResults(swapOther, gold, { goldSql }).match, false);
  assert.equal(compareResults(swapTie, gold, { goldSql, ties: false }).match, false);
  // the sort key is not an output column: ties cannot be told, so order is compared row by row
  const hidden = "SELECT name FROM t ORDER BY score DESC";
  assert.equal(compareResults(res([["a"], ["c"], ["b"]]), res([["a"], ["b"], ["c"]]), { goldSql: hidden }).match, false);
  // a name that resolves to a column the gold is not actually sorted by is not trusted
  const wrong = res([["x", 1], ["y", 1], ["x", 1]], ["k", "v"]);
  assert.equal(compareResults(res([["x", 1], ["x", 1], ["y", 1]]), wrong, { goldSql: "SELECT k, v FROM t ORDER BY k" }).match, false);
});

test("NULLs: equal only to NULL, in any column position", () => {
  assert.equal(same([[null, 1], [2, null]], [[1, null], [null, 2]]), true);
  assert.equal(same([[null]], [[0]]), false);
  assert.equal(same([[null]], [[""]]), false);
  assert.equal(same([[null], [null]], [[null], [null]]), true);
});

test("floats at the rounding edge and the round option", () => {
  assert.equal(same([[0.13]], [[0.125]]), true);
  assert.equal(same([[2.67]], [[2.675]]), true);
  assert.equal(same([[2.68]], [[2.675]]), false);
  assert.equal(same([[-0]], [[0]]), true);
  assert.equal(same([[1.001]], [[1.004]]), true);
  assert.equal(same([[1.001]], [[1.004]], { round: 3 }), false);
  assert.equal(same([[1.001]], [[1.001000001]], { round: null }), false);
  assert.equal(same([[3]], [[3.0]], { round: null }), true);
});

test("text vs number and numeric text", () => {
  assert.equal(same([["1"]], [[1]]), false);
  assert.equal(same([["1,234.50"]], [[1234.5]], { numericText: true }), true);
  assert.equal(same([["1,234.50"]], [[1234.5]]), false);
});

test("text: trimmed and case-folded by default, both can be turned off", () => {
  assert.equal(same([[" Straße "]], [["STRASSE"]]), true);
  assert.equal(same([["Alice"]], [["alice"]], { caseFold: false }), false);
  assert.equal(same([["a "]], [["a"]], { trim: false }), false);
});

test("blobs compare by bytes", () => {
  assert.equal(same([[{ blob: "00ff" }]], [[{ blob: "00FF" }]]), true);
  assert.equal(same([[{ blob: "61" }]], [["a"]]), false);
});

test("a candidate over the row cap is too large and not compared", () => {
  const r = compareResults(res([[1], [2]], undefined, true), res([[1], [2]]));
  assert.equal(r.match, false);
  assert.equal(r.tooLarge, true);
  assert.match(r.reason, /too large/);
});

test("subset (BIRD-Platinum): candidate rows must be among the gold rows, with a row count rule", () => {
  const gold = [[1, "a"], [2, "b"], [3, "c"]];
  assert.equal(same([["b", 2]], gold, { subset: true }), true);
  assert.equal(same([[2, "b"], [4, "d"]], gold, { subset: true }), false);
  assert.equal(same([[2, "b"]], gold, { subset: true, subsetRows: { op: "=", n: 2 } }), false);
  assert.equal(same([[2, "b"], [1, "a"]], gold, { subset: true, subsetRows: { op: "=", n: 2 } }), true);
  assert.equal(same([[2, "b"], [1, "a"]], gold, { subset: true, subsetRows: { op: ">=", n: 3 } }), false);
  assert.equal(same([[2, "a"]], gold, { subset: true }), false, "values must pair as in a gold row");
});

test("reasons name a missing gold row", () => {
  const r = compareResults(res([[1, "x"]]), res([[1, "y"]]));
  assert.equal(r.reason, 'result differs: got 1 row x 2 cols, want 1 row x 2 cols; gold row (1, "y") is missing');
});

test("bad options are typed errors", () => {
  assert.throws(() => compareResults(res([[1]]), res([[1]]), { round: -1 }), /round must be/);
  assert.throws(() => compareResults(res([[1]]), res([[1]]), { round: 1.5 }), /round must be/);
  assert.throws(() => compareResults(res([[1]]), res([[1]]), { order: "sometimes" as never }), /order must be/);
});

test("seeded random tables: any column permutation and row shuffle matches; one changed cell does not", () => {
  let s = 12345;
  const rnd = () => ((s = (Math.imul(s, 1103515245) + 12345) >>> 0) / 4294967296);
  const pick = () => {
    const r = rnd();
    return r < 0.1 ? null : r < 0.5 ? Math.floor(rnd() * 3) : r < 0.7 ? ["x", "y", "Z"][Math.floor(rnd() * 3)] : Math.round(rnd() * 300) / 100;
  };
  for (let trial = 0; trial < 60; trial++) {
    const rows = 1 + Math.floor(rnd() * 25);
    const cols = 1 + Math.floor(rnd() * 11);
    const gold = [...Array(rows)].map(() => [...Array(cols)].map(pick));
    if (trial % 3 === 0) gold.forEach((r) => (r[cols - 1] = r[0])); // a duplicated column
    const perm = [...Array(cols).keys()].sort(() => rnd() - 0.5);
    const cand = gold.map((r) => perm.map((c) => r[c])).sort(() => rnd() - 0.5);
    assert.equal(same(cand, gold), true, `trial ${trial}`);
    const r = Math.floor(rnd() * rows);
    const c = Math.floor(rnd() * cols);
    const changed = cand.map((row) => [...row]);
    changed[r][c] = "changed";
    assert.equal(same(changed, gold), false, `trial ${trial} changed`);
  }
});

test("a candidate holding the gold's own result gives the same verdict and reason as an equal copy", () => {
  const cases: Array<[SqlValue[][], Record<string, unknown>]> = [
    [[[1, "a"], [2, "b"]], {}],
    [[[1, "a"], [2, "b"]], { goldSql: "SELECT x, y FROM t ORDER BY x" }],
    [[[1, "a"]], { goldSql: "SELECT x, y FROM t ORDER BY x" }],
    [[[3.14159, null], [3.14159, null]], { order: "always", columnOrder: "strict" }],
    [[], { goldSql: "SELECT x FROM t ORDER BY x" }],
  ];
  for (const [rows, opts] of cases) {
    const gold = res(rows);
    const copy = res(rows.map((r) => [...r]));
    assert.deepEqual(compareResults(gold, gold, opts), compareResults(copy, gold, opts));
  }
  // the subset rule keeps its own checks (a row-count rule can fail a result against itself)
  const gold = res([[1], [2]]);
  const subset = { subset: true, subsetRows: { op: "=", n: 3 } } as const;
  assert.deepEqual(compareResults(gold, gold, subset), compareResults(res([[1], [2]]), gold, subset));
  assert.equal(compareResults(gold, gold, subset).match, false);
});
