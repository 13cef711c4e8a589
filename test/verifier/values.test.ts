import { test } from "node:test";
import assert from "node:assert/strict";
import Database from "better-sqlite3";
import { DEFAULT_VALUE_RULES, foldText, numberKey, parseNumericText, valueKey } from "../../lib/verifier/values.js";

const key = (v: Parameters<typeof valueKey>[0], over: Partial<typeof DEFAULT_VALUE_RULES> = {}) => valueKey(v, { ...DEFAULT_VALUE_RULES, ...over });

test("numbers round to 2 decimals like SQLite's ROUND, halves away from zero on the binary value", () => {
  assert.equal(numberKey(0.125, 2), "0.13");
  assert.equal(numberKey(-0.125, 2), "-0.13");
  assert.equal(numberKey(2.675, 2), "2.67", "the double nearest 2.675 is below the half");
  assert.equal(numberKey(1.005, 2), "1");
  assert.equal(numberKey(0.1 + 0.2, 2), "0.3");
  assert.equal(numberKey(2.5, 0), "3");
  assert.equal(numberKey(-2.5, 0), "-3");
  assert.notEqual(numberKey(1.234, 2), numberKey(1.236, 2));
});

test("rounding in SQL always matches not rounding", () => {
  const db = new Database(":memory:");
  const st = db.prepare("SELECT round(?, 2) AS r");
  for (const x of [0.125, 2.675, 1.005, -0.125, 10.005, 99.995, 0.015, 123456.785, -1e-9, 7 / 3]) {
    const r = (st.get(x) as { r: number }).r;
    assert.equal(numberKey(x, 2), numberKey(r, 2), `x=${x} round=${r}`);
  }
  db.close();
});

test("-0 equals 0; small negatives round to 0 without a sign", () => {
  assert.equal(numberKey(-0, 2), "0");
  assert.equal(numberKey(-0.001, 2), "0");
  assert.equal(numberKey(-0, null), "0");
});

test("integers and reals compare as numbers; exact mode keeps all digits", () => {
  assert.equal(key(5), key(5.0));
  assert.equal(key(5), key(5.001));
  assert.notEqual(key(5, { round: null }), key(5.001, { round: null }));
  assert.equal(key(2 ** 53 + 2), "n9007199254740994");
  assert.notEqual(key(1234567890123), key(1234567890124));
  assert.equal(numberKey(Infinity, 2), "inf");
});

test("text vs number differ unless numeric text is on", () => {
  assert.notEqual(key("1"), key(1));
  assert.equal(key("1", { numericText: true }), key(1));
  assert.equal(key("1,234.50", { numericText: true }), key(1234.5));
  assert.equal(key(" $12 ", { numericText: true }), key(12));
  assert.equal(parseNumericText("1,23"), null, "bad grouping is not a number");
  assert.equal(parseNumericText("12%"), null);
  assert.equal(parseNumericText("0x10"), null);
  assert.equal(parseNumericText("abc"), null);
  assert.equal(parseNumericText("."), null);
  assert.equal(parseNumericText("-1.5e3"), -1500);
});

test("text is trimmed and Unicode case-folded by default", () => {
  assert.equal(key("  Alice "), key("alice"));
  assert.equal(key("STRASSE"), key("straße"));
  assert.equal(key("ẞ"), key("ß"));
  assert.equal(key("ÉCOLE"), key("école"));
  assert.equal(key("e\u0301cole"), key("école"), "decomposed and composed forms are the same text");
  assert.equal(key("ΟΔΟΣ"), key("οδος"));
  assert.notEqual(key("Alice", { caseFold: false }), key("alice", { caseFold: false }));
  assert.notEqual(key(" a", { trim: false }), key("a", { trim: false }));
  assert.notEqual(key("alice"), key("alicia"));
  assert.equal(foldText("İ", { trim: true, caseFold: true }), "i̇");
  assert.notEqual(key("ı"), key("i"), "dotless i is not folded to i");
  assert.equal(key("KIRMIZI"), key("kirmizi"));
});

test("NULL equals only NULL; blobs compare by bytes and never equal text", () => {
  assert.equal(key(null), key(null));
  assert.notEqual(key(null), key(""));
  assert.notEqual(key(null), key(0));
  assert.notEqual(key(null), key("null"));
  assert.equal(key({ blob: "00FF" }), key({ blob: "00ff" }));
  assert.notEqual(key({ blob: "6869" }), key("hi"));
  assert.notEqual(key({ blob: "00" }), key({ blob: "0000" }));
});
