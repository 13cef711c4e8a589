import { test } from "node:test";
import assert from "node:assert/strict";
import { extractSql, normalizeSql, stripThinking } from "../../lib/verifier/extract.js";

test("solution block wins over fences and is normalised", () => {
  const reply = "```sql\nSELECT 1\n```\n<solution>\nSELECT name\n   FROM   t ;\n</solution>";
  assert.equal(extractSql(reply), "SELECT name FROM t");
});

test("the last of several solution blocks is taken; a fence inside it is unwrapped", () => {
  const reply = "<solution>SELECT 1</solution> retry <SOLUTION>```sql\nSELECT 2;\n```</SOLUTION>";
  assert.equal(extractSql(reply), "SELECT 2");
});

test("an unclosed solution block is not a solution", () => {
  assert.equal(extractSql("<solution>SELECT 1 FROM t", { fallback: false }), null);
});

test("the last sql or bare fence is taken; other languages are not", () => {
  const reply = "```sql\nSELECT a FROM t\n```\nthen\n```\nSELECT b FROM t;\n```\n```python\nprint(1)\n```";
  assert.equal(extractSql(reply), "SELECT b FROM t");
  assert.equal(extractSql("```SQLite\nSELECT 3\n```"), "SELECT 3");
  assert.equal(extractSql("```python\nx = 'SELECT 1'\n```", { fallback: false }), null);
});

test("an unclosed fence is ignored (the fallback may still find the query)", () => {
  assert.equal(extractSql("```sql\nSELECT 1", { fallback: false }), null);
  assert.equal(extractSql("```sql\nSELECT 1"), "SELECT 1");
});

test("think blocks are removed first, including a lone closing tag and an unclosed opening tag", () => {
  assert.equal(extractSql("<think>```sql\nSELECT bad\n```</think>```sql\nSELECT good\n```"), "SELECT good");
  assert.equal(extractSql("draft SELECT bad</think>\n```sql\nSELECT good\n```"), "SELECT good");
  assert.equal(extractSql("```sql\nSELECT good\n```<think>```sql\nSELECT bad\n```"), "SELECT good");
  assert.equal(extractSql("<think>only SELECT thoughts</think>"), null);
  assert.equal(stripThinking("a<think>b</think>c"), "a c");
});

test("fallback takes text from the first SELECT or CTE-opening WITH up to a semicolon; can be turned off", () => {
  assert.equal(extractSql("The query is SELECT a FROM t; it returns a."), "SELECT a FROM t");
  assert.equal(extractSql("with care: WITH x AS (SELECT 1) SELECT * FROM x"), "WITH x AS (SELECT 1) SELECT * FROM x");
  assert.equal(extractSql("Answer: SELECT ';' AS s FROM t; done"), "SELECT ';' AS s FROM t");
  assert.equal(extractSql("The query is SELECT a FROM t", { fallback: false }), null);
  assert.equal(extractSql("I cannot answer that with certainty."), null);
});

test("no SQL, empty blocks and semicolon-only blocks give null", () => {
  assert.equal(extractSql(""), null);
  assert.equal(extractSql("<solution>  ;; </solution>"), null);
  assert.equal(extractSql("```sql\n\n```", { fallback: false }), null);
});

test("normalisation keeps literals and quoted identifiers intact and drops comments", () => {
  assert.equal(normalizeSql("SELECT  'a  b' ,\n\"x  y\" -- note\nFROM t /* c */ WHERE n = 'it''s'  ;; "), "SELECT 'a  b' , \"x  y\" FROM t WHERE n = 'it''s'");
  assert.equal(normalizeSql("SELECT '--not a comment' FROM t"), "SELECT '--not a comment' FROM t");
  assert.equal(normalizeSql(" ; "), null);
});

test("a non-SELECT statement in a block is returned (the executor judges it unsafe)", () => {
  assert.equal(extractSql("<solution>DELETE FROM t;</solution>"), "DELETE FROM t");
});

test("words before the query inside a solution block are dropped", () => {
  assert.equal(extractSql("<solution>The final query is: SELECT a FROM t</solution>"), "SELECT a FROM t");
  assert.equal(extractSql("<solution>(SELECT 1) UNION SELECT 2</solution>"), "(SELECT 1) UNION SELECT 2");
  assert.equal(extractSql("<solution>no query here</solution>"), null);
  assert.equal(extractSql("<solution>PRAGMA table_info(t)</solution>"), "PRAGMA table_info(t)");
});

test("a second statement after a semicolon stays in the bare query, as in a fence; prose after it does not", () => {
  assert.equal(extractSql("SELECT 1; DELETE FROM orders"), "SELECT 1; DELETE FROM orders");
  assert.equal(extractSql("SELECT 1; DELETE FROM orders"), extractSql("```sql\nSELECT 1; DELETE FROM orders\n```"));
  assert.equal(extractSql("Run SELECT a FROM t;\n  /* then */ drop table t; and that is all"), "SELECT a FROM t; drop table t");
  assert.equal(extractSql("SELECT a FROM t; WITH x AS (SELECT 1) SELECT * FROM x"), "SELECT a FROM t; WITH x AS (SELECT 1) SELECT * FROM x");
  assert.equal(extractSql("SELECT a FROM t; with it you get a."), "SELECT a FROM t");
});
