import { test } from "node:test";
import assert from "node:assert/strict";
import { hasOrderByAnywhere, hasTopLevelOrderBy, removeDistinct, resolveOrderColumn, topLevelOrderTerms } from "../../lib/verifier/clauses.js";
import { normalizeSql } from "../../lib/verifier/extract.js";

test("top-level ORDER BY is detected", () => {
  assert.equal(hasTopLevelOrderBy("SELECT a FROM t ORDER BY a"), true);
  assert.equal(hasTopLevelOrderBy("select a from t order\n  by a desc limit 3"), true);
  assert.equal(hasTopLevelOrderBy("SELECT a FROM t UNION SELECT b FROM u ORDER BY 1"), true);
  assert.equal(hasTopLevelOrderBy("WITH c AS (SELECT a FROM t ORDER BY a) SELECT a FROM c ORDER BY a"), true);
});

test("ORDER BY inside subqueries, CTEs, windows and aggregates is not top-level", () => {
  assert.equal(hasTopLevelOrderBy("SELECT * FROM (SELECT a FROM t ORDER BY a LIMIT 3)"), false);
  assert.equal(hasTopLevelOrderBy("WITH c AS (SELECT a FROM t ORDER BY a) SELECT a FROM c"), false);
  assert.equal(hasTopLevelOrderBy("SELECT a, rank() OVER (PARTITION BY b ORDER BY c) FROM t"), false);
  assert.equal(hasTopLevelOrderBy("SELECT a, sum(x) OVER w FROM t WINDOW w AS (ORDER BY a)"), false);
  assert.equal(hasTopLevelOrderBy("SELECT group_concat(name ORDER BY name) FROM t"), false);
  assert.equal(hasTopLevelOrderBy("SELECT a FROM t WHERE a IN (SELECT a FROM u ORDER BY a)"), false);
});

test("ORDER BY in strings, quoted identifiers and comments does not count", () => {
  assert.equal(hasTopLevelOrderBy("SELECT 'order by x' FROM t"), false);
  assert.equal(hasTopLevelOrderBy('SELECT "order by" FROM t -- order by a'), false);
  assert.equal(hasTopLevelOrderBy("SELECT a FROM t /* ORDER BY a */"), false);
  assert.equal(hasTopLevelOrderBy("SELECT a FROM [order by]"), false);
  assert.equal(hasTopLevelOrderBy("SELECT ')' FROM t ORDER BY a"), true, "a paren in a string must not change depth");
  assert.equal(hasTopLevelOrderBy("SELECT 'it''s (' FROM t ORDER BY a"), true);
});

test("ORDER BY anywhere (Spider's rule) counts nested ones", () => {
  assert.equal(hasOrderByAnywhere("SELECT a, rank() OVER (ORDER BY c) FROM t"), true);
  assert.equal(hasOrderByAnywhere("SELECT * FROM (SELECT a FROM t ORDER BY a)"), true);
  assert.equal(hasOrderByAnywhere("SELECT 'order by' FROM t"), false);
});

test("order terms and their output columns", () => {
  const terms = topLevelOrderTerms("SELECT T1.name, COUNT(*) FROM t AS T1 GROUP BY 1 ORDER BY COUNT (*) DESC, t1.\"name\" ASC NULLS LAST LIMIT 5")!;
  assert.equal(terms.length, 2);
  assert.equal(terms[0].desc, true);
  assert.equal(terms[1].nullsFirst, false);
  assert.equal(resolveOrderColumn(terms[0], ["name", "COUNT(*)"]), 1);
  assert.equal(resolveOrderColumn(terms[1], ["name", "COUNT(*)"]), 0);
  const byNumber = topLevelOrderTerms("SELECT a, b FROM t ORDER BY 2")!;
  assert.equal(resolveOrderColumn(byNumber[0], ["a", "b"]), 1);
  assert.equal(resolveOrderColumn(byNumber[0], ["a"]), -1);
  const hidden = topLevelOrderTerms("SELECT a FROM t ORDER BY b COLLATE NOCASE")!;
  assert.equal(resolveOrderColumn(hidden[0], ["a", "b"]), -1, "a collation makes ties unknowable");
  const ambiguous = topLevelOrderTerms("SELECT x.n, y.n FROM x, y ORDER BY n")!;
  assert.equal(resolveOrderColumn(ambiguous[0], ["n", "n"]), -1);
  assert.equal(topLevelOrderTerms("SELECT a FROM t"), null);
});

test("DISTINCT is removed as a keyword only; whitespace outside literals collapses, non-ASCII spaces included", () => {
  assert.equal(removeDistinct("SELECT DISTINCT a, count(distinct b) FROM t WHERE c = 'DISTINCT' AND \"distinct\" > 0"), "SELECT   a, count(  b) FROM t WHERE c = 'DISTINCT' AND \"distinct\" > 0");
  assert.equal(normalizeSql("SELECT 1,\u00a0a  -- note\n FROM\t t ;; "), "SELECT 1, a FROM t");
  assert.equal(normalizeSql("SELECT 'a  b', \"c  d\" /* x */ FROM t"), "SELECT 'a  b', \"c  d\" FROM t");
});
