import { test } from "node:test";
import assert from "node:assert/strict";
import { codeTokens, tokenize } from "../../lib/db/sqltext.js";

test("the lexer's quoted forms: doubled quotes inside, unterminated ones, variables, non-ASCII words", () => {
  const t = (sql: string) => tokenize(sql).map((x) => [x.type, x.text]);
  assert.deepEqual(t("'plain' \"x\"\"y\" `a``b` [c]"), [["string", "plain"], ["quoted", 'x"y'], ["quoted", "a`b"], ["quoted", "c"]]);
  assert.deepEqual(t("'open"), [["string", "open"]]);
  assert.deepEqual(t("'a''"), [["string", "a'"]]);
  assert.deepEqual(t("[open"), [["quoted", "open"]]);
  assert.deepEqual(t("x'0A' :p1 @v $w ?2"), [["blob", "x'0A'"], ["variable", ":p1"], ["variable", "@v"], ["variable", "$w"], ["variable", "?2"]]);
  assert.deepEqual(t("café_1 2.5E+3x .7"), [["word", "café_1"], ["number", "2.5E+3x"], ["number", ".7"]]);
});

test("the lexer keeps strings, quoted names and comments apart", () => {
  const t = tokenize(`select 'a''b', "c""d", [e f], x'00', -- tail\n 1.5e-3 /* c */`);
  assert.deepEqual(
    t.map((x) => [x.type, x.text]),
    [["word", "select"], ["string", "a'b"], ["punct", ","], ["quoted", 'c"d'], ["punct", ","], ["quoted", "e f"], ["punct", ","], ["blob", "x'00'"], ["punct", ","], ["comment", " tail"], ["number", "1.5e-3"], ["comment", " c "]],
  );
});

test("the lexer tracks parenthesis depth and keeps unterminated literals", () => {
  const toks = tokenize("f((a)) 'x");
  assert.deepEqual(toks.map((t) => t.depth), [0, 0, 1, 2, 1, 0, 0]);
  assert.equal(toks[toks.length - 1].type, "string");
  assert.deepEqual(codeTokens("a -- c\n(b)").map((t) => [t.text, t.depth]), [["a", 0], ["(", 0], ["b", 1], [")", 0]]);
});

test("the lexer's character classes: non-ASCII space, non-ASCII words, numbers with exponents, $ inside words", () => {
  const raw = (sql: string) => tokenize(sql).map((t) => [t.type, sql.slice(t.start, t.end)]);
  // a non-ASCII space where a token would start is whitespace, but inside a word it is a word character (as any non-ASCII unit)
  assert.deepEqual(raw("\u00a0b \u2028c\u3000d"), [["word", "b"], ["word", "c\u3000d"]]);
  assert.deepEqual(raw("a \u3000b"), [["word", "a"], ["word", "b"]]);
  assert.deepEqual(raw("a\u00a0b"), [["word", "a\u00a0b"]]);
  assert.deepEqual(raw("prix_€ x$1 _y"), [["word", "prix_€"], ["word", "x$1"], ["word", "_y"]]);
  assert.deepEqual(raw("1.5e-3+.5E+2 0x1F"), [["number", "1.5e-3"], ["punct", "+"], ["number", ".5E+2"], ["number", "0x1F"]]);
  assert.deepEqual(raw("$a"), [["variable", "$a"]]);
  assert.deepEqual(raw("'it''s' `q` [r s] -- c\n/* d */"), [["string", "'it''s'"], ["quoted", "`q`"], ["quoted", "[r s]"], ["comment", "-- c"], ["comment", "/* d */"]]);
});
