import { test } from "node:test";
import assert from "node:assert/strict";
import Database from "better-sqlite3";
import { readFileSync, statSync } from "node:fs";
import { join } from "node:path";
import { buildShopDatabase, defaultShopPath, shopNotes, shopSchemaSql } from "../../lib/db/shop/build.js";
import { fileSha256 } from "../../lib/db/copies.js";
import { scratchDir } from "../helpers.js";

/** sha256 of the shop database for the default seed (42) with better-sqlite3 12's SQLite. */
const DEFAULT_SHA256 = "043ee48edf9967e9786a0a6f55b4366267a66908caf10efc9390bca9acdee037";

const dir = scratchDir("t2s-shop-");
const built = buildShopDatabase(join(dir, "shop.sqlite"));

test("the default seed gives the pinned bytes, and the committed file is that build", () => {
  assert.equal(built.sha256, DEFAULT_SHA256);
  assert.equal(fileSha256(defaultShopPath()), DEFAULT_SHA256);
  assert.ok(statSync(built.path).size < 1024 * 1024);
});

test("the same seed is byte-identical; another seed differs", () => {
  const again = buildShopDatabase(join(dir, "again.sqlite"), { seed: 42 });
  assert.equal(again.sha256, built.sha256);
  assert.deepEqual(readFileSync(again.path), readFileSync(built.path));
  const other = buildShopDatabase(join(dir, "other.sqlite"), { seed: 7 });
  assert.notEqual(other.sha256, built.sha256);
});

test("the schema is exactly schema.sql, comments included", () => {
  const db = new Database(built.path, { readonly: true });
  const tables = db.prepare("SELECT name, sql FROM sqlite_master WHERE type = 'table' ORDER BY rowid").all() as { name: string; sql: string }[];
  db.close();
  assert.deepEqual(tables.map((t) => t.name), ["categories", "products", "customers", "employees", "orders", "order_items", "payments", "reviews"]);
  const schema = shopSchemaSql();
  for (const t of tables) assert.ok(schema.includes(t.sql), `${t.name} DDL differs from schema.sql`);
  assert.match(shopNotes(), /Order total/);
});

/** Each check returns 0 when the wrinkle is as documented. */
const one = (db: Database.Database, sql: string) => Object.values(db.prepare(sql).get() as object)[0] as number;

test("the data has the documented shape and wrinkles", () => {
  const db = new Database(built.path, { readonly: true });
  try {
    assert.equal(one(db, "SELECT count(*) FROM orders"), 300);
    assert.equal(one(db, "SELECT min(order_date) >= '2023-01-01' AND max(order_date) <= '2025-06-30' FROM orders"), 1);
    assert.ok(one(db, "SELECT count(DISTINCT country) FROM customers") >= 14);
    assert.ok(one(db, "SELECT count(*) FROM customers WHERE customer_id NOT IN (SELECT customer_id FROM orders)") >= 5);
    assert.ok(one(db, "SELECT count(*) FROM products WHERE product_id NOT IN (SELECT product_id FROM reviews)") >= 6);
    assert.ok(one(db, "SELECT count(*) FROM products WHERE product_id NOT IN (SELECT product_id FROM order_items)") >= 1);
    assert.ok(one(db, "SELECT count(*) FROM products WHERE discontinued = 1") >= 3);
    assert.ok(one(db, "SELECT count(*) FROM categories WHERE category_id NOT IN (SELECT category_id FROM products)") >= 1);
    assert.ok(one(db, "SELECT count(*) FROM customers WHERE referred_by IS NOT NULL") >= 5);
    assert.ok(one(db, "SELECT count(*) FROM orders WHERE discount_pct IS NOT NULL") >= 30);
    assert.ok(one(db, "SELECT count(*) FROM orders WHERE sales_rep_id IS NULL") >= 100);
    assert.ok(one(db, "SELECT count(*) FROM reviews WHERE title IS NULL") >= 5);
    for (const s of ["pending", "paid", "shipped", "delivered", "cancelled", "refunded"]) {
      assert.ok(one(db, `SELECT count(*) FROM orders WHERE status = '${s}'`) >= 3, s);
    }
    // failed-then-captured payments, refunds carried by a refunded payment, no capture for pending/cancelled
    assert.ok(one(db, "SELECT count(DISTINCT order_id) FROM payments p WHERE status = 'failed' AND EXISTS (SELECT 1 FROM payments q WHERE q.order_id = p.order_id AND q.status = 'captured')") >= 5);
    assert.equal(one(db, "SELECT count(*) FROM orders o WHERE status = 'refunded' AND NOT EXISTS (SELECT 1 FROM payments p WHERE p.order_id = o.order_id AND p.status = 'refunded')"), 0);
    assert.equal(one(db, "SELECT count(*) FROM payments p JOIN orders o USING (order_id) WHERE o.status IN ('pending', 'cancelled') AND p.status <> 'failed'"), 0);
    // the NOTES total formula matches what was collected, to the cent
    assert.equal(
      one(db, `SELECT count(*) FROM (SELECT o.order_id, round(sum(i.quantity * i.unit_price) * (1 - coalesce(o.discount_pct, 0) / 100.0) + o.shipping_cost, 2) AS total,
        (SELECT round(sum(amount), 2) FROM payments p WHERE p.order_id = o.order_id AND p.status IN ('captured', 'refunded')) AS paid
        FROM orders o JOIN order_items i USING (order_id) GROUP BY o.order_id) WHERE paid IS NOT NULL AND paid <> total`),
      0,
    );
    // shipped_at NULL exactly for orders that never shipped
    assert.equal(one(db, "SELECT count(*) FROM orders WHERE (shipped_at IS NULL) <> (status IN ('pending', 'paid', 'cancelled'))"), 0);
    assert.equal(one(db, "SELECT count(*) FROM orders WHERE shipped_at < order_date"), 0);
    // a manager hierarchy at least four levels deep with one head
    assert.equal(one(db, "SELECT count(*) FROM employees WHERE manager_id IS NULL"), 1);
    assert.ok(one(db, "WITH RECURSIVE t(id, d) AS (SELECT employee_id, 1 FROM employees WHERE manager_id IS NULL UNION ALL SELECT e.employee_id, d + 1 FROM employees e JOIN t ON e.manager_id = t.id) SELECT max(d) FROM t") >= 4);
    assert.ok(one(db, "WITH RECURSIVE t(id, d) AS (SELECT category_id, 1 FROM categories WHERE parent_id IS NULL UNION ALL SELECT c.category_id, d + 1 FROM categories c JOIN t ON c.parent_id = t.id) SELECT max(d) FROM t") >= 3);
    // reviews only by buyers, after they ordered; orders only after signup; items only after the product existed
    assert.equal(one(db, "SELECT count(*) FROM reviews r WHERE NOT EXISTS (SELECT 1 FROM orders o JOIN order_items i USING (order_id) WHERE o.customer_id = r.customer_id AND i.product_id = r.product_id AND o.order_date <= r.created_at)"), 0);
    assert.equal(one(db, "SELECT count(*) FROM orders o JOIN customers c USING (customer_id) WHERE o.order_date < c.signup_date"), 0);
    assert.equal(one(db, "SELECT count(*) FROM order_items i JOIN orders o USING (order_id) JOIN products p USING (product_id) WHERE o.order_date < p.created_at"), 0);
    assert.equal(one(db, "SELECT count(*) FROM orders o JOIN employees e ON e.employee_id = o.sales_rep_id WHERE e.department <> 'Sales' OR o.order_date < e.hire_date"), 0);
  } finally {
    db.close();
  }
});

test("bad seeds are refused", () => {
  assert.throws(() => buildShopDatabase(join(dir, "x.sqlite"), { seed: -1 }), /seed/);
  assert.throws(() => buildShopDatabase(join(dir, "x.sqlite"), { seed: 1.5 }), /seed/);
});
