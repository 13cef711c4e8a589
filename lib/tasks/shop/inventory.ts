/**
 * The live data inventory of a shop database: the real values (product names, countries, cities, dates,
 * statuses, people) that question templates draw from, read through a read-only connection.
 */
import Database from "better-sqlite3";
import { existsSync } from "node:fs";
import { T2sError } from "../../core/errors.js";

export interface NamedRow {
  id: number;
  name: string;
}

export interface ProductRow extends NamedRow {
  category_id: number;
  category: string;
  price: number;
  cost: number;
  stock: number;
  discontinued: number;
  created_year: string;
}

export interface PersonRow {
  id: number;
  first: string;
  last: string;
}

export interface Inventory {
  categories: (NamedRow & { parent_id: number | null })[];
  /** Top-level categories that have subcategories. */
  parents: NamedRow[];
  /** Leaf categories (no subcategories) that hold at least one product, so "products in X" is unambiguous. */
  productCategories: NamedRow[];
  /** Products whose name is unique (so a question naming one is unambiguous). */
  products: ProductRow[];
  /** Products with at least one review / at least one order line. */
  reviewedProducts: ProductRow[];
  orderedProducts: ProductRow[];
  countries: string[];
  shipCountries: string[];
  cities: { city: string; country: string }[];
  statuses: string[];
  years: string[];
  /** 'YYYY-MM' months that have orders. */
  months: string[];
  signupYears: string[];
  reviewYears: string[];
  methods: string[];
  paymentStatuses: string[];
  departments: string[];
  /** Customers with a unique full name who placed at least one order. */
  buyers: (PersonRow & { country: string })[];
  /** Customers with a unique full name who referred someone. */
  referrers: PersonRow[];
  employees: (PersonRow & { department: string; manager_id: number | null })[];
  /** Employees (unique names) with at least one direct report. */
  managers: PersonRow[];
  /** Employees (unique names) who are sales reps on at least one order. */
  reps: PersonRow[];
  /** Orders that shipped, with their date. */
  shippedOrders: { id: number; date: string }[];
  orderIds: number[];
  maxPrice: number;
}

/** Reads the inventory of the shop database at `dbPath` (read-only). */
export function readInventory(dbPath: string): Inventory {
  if (!existsSync(dbPath)) throw new T2sError("no_database", `no shop database at ${dbPath}; build it first (t2s db build-shop)`);
  const db = new Database(dbPath, { readonly: true, fileMustExist: true });
  try {
    const all = <T>(sql: string) => db.prepare(sql).all() as T[];
    const col = (sql: string) => (db.prepare(sql).raw(true).all() as unknown[][]).map((r) => String(r[0]));
    const products = all<ProductRow>(`SELECT p.product_id AS id, p.name, p.category_id, c.name AS category, p.price, p.cost, p.stock,
        p.discontinued, substr(p.created_at, 1, 4) AS created_year
      FROM products p JOIN categories c ON c.category_id = p.category_id
      WHERE p.name IN (SELECT name FROM products GROUP BY name HAVING COUNT(*) = 1) ORDER BY p.product_id`);
    const ids = (sql: string) => new Set(col(sql).map(Number));
    const reviewed = ids("SELECT DISTINCT product_id FROM reviews");
    const ordered = ids("SELECT DISTINCT product_id FROM order_items");
    const uniqueCustomers = `SELECT customer_id AS id, first_name AS first, last_name AS last, country FROM customers
      WHERE first_name || ' ' || last_name IN (SELECT first_name || ' ' || last_name FROM customers GROUP BY 1 HAVING COUNT(*) = 1)`;
    const uniqueEmployees = `SELECT employee_id AS id, first_name AS first, last_name AS last, department, manager_id FROM employees
      WHERE first_name || ' ' || last_name IN (SELECT first_name || ' ' || last_name FROM employees GROUP BY 1 HAVING COUNT(*) = 1)`;
    const employees = all<PersonRow & { department: string; manager_id: number | null }>(uniqueEmployees + " ORDER BY employee_id");
    const managerIds = ids("SELECT DISTINCT manager_id FROM employees WHERE manager_id IS NOT NULL");
    const repIds = ids("SELECT DISTINCT sales_rep_id FROM orders WHERE sales_rep_id IS NOT NULL");
    const categories = all<NamedRow & { parent_id: number | null }>("SELECT category_id AS id, name, parent_id FROM categories ORDER BY category_id");
    const parentIds = ids("SELECT DISTINCT parent_id FROM categories WHERE parent_id IS NOT NULL");
    const productCats = ids("SELECT DISTINCT category_id FROM products");
    return {
      categories,
      parents: categories.filter((c) => parentIds.has(c.id)),
      productCategories: categories.filter((c) => productCats.has(c.id) && !parentIds.has(c.id)),
      products,
      reviewedProducts: products.filter((p) => reviewed.has(p.id)),
      orderedProducts: products.filter((p) => ordered.has(p.id)),
      countries: col("SELECT DISTINCT country FROM customers ORDER BY 1"),
      shipCountries: col("SELECT DISTINCT shipping_country FROM orders ORDER BY 1"),
      cities: all<{ city: string; country: string }>("SELECT DISTINCT city, country FROM customers ORDER BY country, city"),
      statuses: col("SELECT DISTINCT status FROM orders ORDER BY 1"),
      years: col("SELECT DISTINCT substr(order_date, 1, 4) FROM orders ORDER BY 1"),
      months: col("SELECT DISTINCT substr(order_date, 1, 7) FROM orders ORDER BY 1"),
      signupYears: col("SELECT DISTINCT substr(signup_date, 1, 4) FROM customers ORDER BY 1"),
      reviewYears: col("SELECT DISTINCT substr(created_at, 1, 4) FROM reviews ORDER BY 1"),
      methods: col("SELECT DISTINCT method FROM payments ORDER BY 1"),
      paymentStatuses: col("SELECT DISTINCT status FROM payments ORDER BY 1"),
      departments: col("SELECT DISTINCT department FROM employees ORDER BY 1"),
      buyers: all<PersonRow & { country: string }>(`${uniqueCustomers} AND customer_id IN (SELECT customer_id FROM orders) ORDER BY customer_id`),
      referrers: all<PersonRow>(`${uniqueCustomers} AND customer_id IN (SELECT referred_by FROM customers WHERE referred_by IS NOT NULL) ORDER BY customer_id`),
      employees,
      managers: employees.filter((e) => managerIds.has(e.id)),
      reps: employees.filter((e) => repIds.has(e.id)),
      shippedOrders: all<{ id: number; date: string }>("SELECT order_id AS id, order_date AS date FROM orders WHERE shipped_at IS NOT NULL ORDER BY order_id"),
      orderIds: col("SELECT order_id FROM orders ORDER BY 1").map(Number),
      maxPrice: Number(col("SELECT MAX(price) FROM products")[0] ?? 0),
    };
  } finally {
    db.close();
  }
}
