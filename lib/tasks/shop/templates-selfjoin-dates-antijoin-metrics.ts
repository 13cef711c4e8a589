/** Templates: self-join/hierarchy, date/time buckets, anti-join/existence, derived metrics. */
import { ROOT_CTE, REVENUE_RULE, REVENUE_STATUSES, full, int, lit, maybe, monthName, oneNumber, tpl, type Template } from "./template.js";

const yr = (col: string, y: string) => `strftime('%Y', ${col}) = '${y}'`;
const SUBTOTAL = "(SELECT SUM(oi.quantity * oi.unit_price) FROM order_items oi WHERE oi.order_id = o.order_id)";
const TOTAL = `(${SUBTOTAL} * (1 - COALESCE(o.discount_pct, 0) / 100.0) + o.shipping_cost)`;
const TOTAL_RULE = "items subtotal (quantity x unit_price) minus the order's discount, plus shipping";

export const SELFJOIN_DATES_ANTIJOIN_METRICS_TEMPLATES: Template[] = [
  // ---- self-join / hierarchy
  tpl("sj_direct_reports", "self_join", "easy", (c) => {
    const m = maybe(c, c.inv.managers);
    if (!m) return null;
    return {
      subject: [`the employees whose direct manager is ${full(m)}`, `who reports directly to ${full(m)}`],
      returns: [`first and last names, sorted by last name then first name`, `each report's first name and last name, ordered by last name, then first name`],
      columns: ["first_name", "last_name"],
      sql: `SELECT e.first_name, e.last_name FROM employees e JOIN employees m ON m.employee_id = e.manager_id WHERE m.first_name = ${lit(m.first)} AND m.last_name = ${lit(m.last)} ORDER BY e.last_name ASC, e.first_name ASC`,
    };
  }),
  tpl("sj_referred_by", "self_join", "easy", (c) => {
    const r = maybe(c, c.inv.referrers);
    if (!r) return null;
    return {
      subject: [`the customers that ${full(r)} referred to the shop`, `everyone who was referred by the customer ${full(r)}`],
      returns: [`customer id, first name and last name, sorted by customer id`, `their id and names (first, last) in ascending id order`],
      columns: ["customer_id", "first_name", "last_name"],
      sql: `SELECT c.customer_id, c.first_name, c.last_name FROM customers c JOIN customers r ON r.customer_id = c.referred_by WHERE r.first_name = ${lit(r.first)} AND r.last_name = ${lit(r.last)} ORDER BY c.customer_id ASC`,
    };
  }),
  tpl("sj_manager_of", "self_join", "easy", (c) => {
    const e = maybe(c, c.inv.employees.filter((x) => x.manager_id !== null));
    if (!e) return null;
    return {
      subject: [`the direct manager of employee ${full(e)}`, `who ${full(e)} reports to`],
      returns: [`the manager's first name, last name and department`, `that manager's first and last name plus their department`],
      columns: ["first_name", "last_name", "department"],
      sql: `SELECT m.first_name, m.last_name, m.department FROM employees e JOIN employees m ON m.employee_id = e.manager_id WHERE e.first_name = ${lit(e.first)} AND e.last_name = ${lit(e.last)}`,
    };
  }),
  tpl("sj_subcategories", "self_join", "easy", (c) => {
    const p = maybe(c, c.inv.parents);
    if (!p) return null;
    return {
      subject: [`the subcategories directly under the category '${p.name}'`, `which categories have '${p.name}' as their direct parent`],
      returns: [`category id and name, sorted by name`, `the id and name of each, alphabetical by name`],
      columns: ["category_id", "name"],
      sql: `SELECT c.category_id, c.name FROM categories c JOIN categories p ON p.category_id = c.parent_id WHERE p.name = ${lit(p.name)} ORDER BY c.name ASC`,
    };
  }),
  tpl("sj_report_counts", "self_join", "medium", (c) => {
    const d = maybe(c, c.inv.departments);
    if (!d) return null;
    const all = int(c, 0, 1) === 1;
    return {
      subject: [`for each manager${all ? "" : ` in the ${d} department`}, the number of employees reporting directly to them`, `how many direct reports every ${all ? "" : `${d}-department `}manager has (managers are employees with at least one report)`],
      returns: [`manager first name, last name and report count, most reports first, ties by last name then first name`, `the manager's names and direct-report count, sorted by count descending, then last name, first name`],
      columns: ["first_name", "last_name", "reports"],
      sql: `SELECT m.first_name, m.last_name, COUNT(*) AS reports FROM employees e JOIN employees m ON m.employee_id = e.manager_id${all ? "" : ` WHERE m.department = ${lit(d)}`} GROUP BY m.employee_id, m.first_name, m.last_name ORDER BY reports DESC, m.last_name ASC, m.first_name ASC`,
    };
  }),
  tpl("sj_earn_more_than_manager", "self_join", "medium", (c) => {
    const d = maybe(c, c.inv.departments);
    if (!d) return null;
    const more = int(c, 0, 1) === 1;
    return {
      subject: [`employees of the ${d} department who earn ${more ? "more" : "less"} than their direct manager`, `which ${d} staff have a salary ${more ? "above" : "below"} that of the person they report to`],
      returns: [`employee last name, their salary and the manager's salary, sorted by employee last name then first name`, `last name, own salary, manager salary; ordered by last name and then first name`],
      columns: ["last_name", "salary", "manager_salary"],
      sql: `SELECT e.last_name, e.salary, m.salary AS manager_salary FROM employees e JOIN employees m ON m.employee_id = e.manager_id WHERE e.department = ${lit(d)} AND e.salary ${more ? ">" : "<"} m.salary ORDER BY e.last_name ASC, e.first_name ASC`,
    };
  }),
  tpl("sj_referred_cross_country", "self_join", "medium", (c) => {
    const k = maybe(c, c.inv.countries);
    if (!k) return null;
    const same = int(c, 0, 1) === 1;
    return {
      subject: [`the number of customers living in '${k}' who were referred by a customer from ${same ? "the same" : "a different"} country`, `how many '${k}' customers have a referrer whose country is ${same ? "also" : "not"} '${k}'`],
      returns: oneNumber("the count"),
      columns: ["customers"],
      sql: `SELECT COUNT(*) AS customers FROM customers c JOIN customers r ON r.customer_id = c.referred_by WHERE c.country = ${lit(k)} AND r.country ${same ? "=" : "<>"} c.country`,
    };
  }),
  tpl("sj_top_referrers", "self_join", "hard", (c) => {
    const n = int(c, 1, 3);
    const y = maybe(c, c.inv.signupYears);
    if (!y) return null;
    return {
      subject: [`customers who referred at least ${n} other customers who signed up in ${y}, with how many of those referred customers placed any order`, `referrers with ${n} or more referred sign-ups dated ${y}; also count how many of those referred people have ordered at least once`],
      returns: [`referrer id, number referred and number of them with an order, most referred first, ties by referrer id`, `referrer customer id, referred count, referred-with-orders count; sorted by referred count descending then id`],
      columns: ["referrer_id", "referred", "referred_with_orders"],
      sql: `SELECT r.customer_id AS referrer_id, COUNT(*) AS referred, SUM(CASE WHEN EXISTS (SELECT 1 FROM orders o WHERE o.customer_id = c.customer_id) THEN 1 ELSE 0 END) AS referred_with_orders FROM customers c JOIN customers r ON r.customer_id = c.referred_by WHERE ${yr("c.signup_date", y)} GROUP BY r.customer_id HAVING COUNT(*) >= ${n} ORDER BY referred DESC, r.customer_id ASC`,
    };
  }),
  tpl("sj_skip_level", "self_join", "hard", (c) => {
    const m = maybe(c, c.inv.managers.filter((x) => c.inv.employees.some((e) => e.manager_id === x.id && c.inv.managers.some((mm) => mm.id === e.id))));
    if (!m) return null;
    return {
      subject: [`the employees exactly two levels below ${full(m)}, i.e. whose manager's manager is ${full(m)}`, `${full(m)}'s skip-level reports (people whose direct manager reports to ${full(m)})`],
      returns: [`employee first name, last name and their direct manager's last name, sorted by last name then first name`, `first name, last name, and the in-between manager's last name; ordered by last name, first name`],
      columns: ["first_name", "last_name", "manager_last_name"],
      sql: `SELECT e.first_name, e.last_name, m.last_name AS manager_last_name FROM employees e JOIN employees m ON m.employee_id = e.manager_id JOIN employees g ON g.employee_id = m.manager_id WHERE g.first_name = ${lit(m.first)} AND g.last_name = ${lit(m.last)} ORDER BY e.last_name ASC, e.first_name ASC`,
    };
  }),
  tpl("sj_parent_product_counts", "self_join", "hard", (c) => {
    const disc = int(c, 0, 1);
    return {
      subject: [`for each top-level category, the number of ${disc ? "discontinued" : "not discontinued"} products filed in it or in any category below it at any depth`, `per top-level category, how many ${disc ? "discontinued" : "active"} products it holds counting all nested subcategories too`],
      returns: [`top-level category name and product count, sorted by name; categories with none omitted`, `the parent name with the count (leave out zero counts), alphabetical`],
      columns: ["top_category", "products"],
      sql: `${ROOT_CTE} SELECT top.name AS top_category, COUNT(*) AS products FROM products p JOIN root ON root.category_id = p.category_id JOIN categories top ON top.category_id = root.top_id WHERE p.discontinued = ${disc} GROUP BY top.category_id, top.name ORDER BY top.name ASC`,
    };
  }),
  // ---- date/time buckets
  tpl("db_orders_per_month", "date_buckets", "easy", (c) => {
    const y = maybe(c, c.inv.years), k = maybe(c, c.inv.shipCountries);
    if (!y || !k) return null;
    return {
      subject: [`the number of orders shipped to '${k}' in each month of ${y} (any status)`, `a monthly order count for ${y}, only orders whose shipping country is '${k}', all statuses`],
      returns: [`month as 'YYYY-MM' and order count, in chronological order, months without orders omitted`, `the month (YYYY-MM) with its count, earliest month first; skip months with no orders`],
      columns: ["month", "orders"],
      sql: `SELECT strftime('%Y-%m', order_date) AS month, COUNT(*) AS orders FROM orders WHERE ${yr("order_date", y)} AND shipping_country = ${lit(k)} GROUP BY month ORDER BY month ASC`,
    };
  }),
  tpl("db_signups_per_year", "date_buckets", "easy", (c) => {
    const k = maybe(c, c.inv.countries);
    if (!k) return null;
    const opt = int(c, 0, 2);
    const optTxt = opt === 2 ? "" : opt ? " who opted in to marketing" : " who did not opt in to marketing";
    return {
      subject: [`how many customers from '${k}'${optTxt} signed up in each year`, `yearly sign-up counts of '${k}' customers${optTxt}`],
      returns: [`year (YYYY) and count, oldest year first`, `the year with the number of sign-ups, in ascending year order`],
      columns: ["year", "signups"],
      sql: `SELECT strftime('%Y', signup_date) AS year, COUNT(*) AS signups FROM customers WHERE country = ${lit(k)}${opt === 2 ? "" : ` AND marketing_opt_in = ${opt}`} GROUP BY year ORDER BY year ASC`,
    };
  }),
  tpl("db_reviews_per_year", "date_buckets", "easy", (c) => {
    const lo = int(c, 1, 4);
    return {
      subject: [`the number of reviews with a rating of ${lo} or higher written in each year`, `per calendar year, how many reviews rated at least ${lo} stars were posted`],
      returns: [`year and review count, sorted by year`, `the year (YYYY) with its count, chronologically`],
      columns: ["year", "reviews"],
      sql: `SELECT strftime('%Y', created_at) AS year, COUNT(*) AS reviews FROM reviews WHERE rating >= ${lo} GROUP BY year ORDER BY year ASC`,
    };
  }),
  tpl("db_revenue_per_quarter", "date_buckets", "medium", (c) => {
    const y = maybe(c, c.inv.years);
    if (!y) return null;
    return {
      subject: [`item revenue (quantity x unit_price, before discount and shipping) per calendar quarter of ${y}, ${REVENUE_RULE[0]}`, `the ${y} quarterly sum of quantity times charged unit price, ${REVENUE_RULE[1]}`],
      returns: [`quarter number 1-4 and revenue rounded to 2 decimals, in quarter order`, `the quarter (1 to 4) with revenue to 2 decimals, sorted by quarter`],
      columns: ["quarter", "revenue"],
      sql: `SELECT (CAST(strftime('%m', o.order_date) AS INTEGER) + 2) / 3 AS quarter, ROUND(SUM(oi.quantity * oi.unit_price), 2) AS revenue FROM orders o JOIN order_items oi ON oi.order_id = o.order_id WHERE ${yr("o.order_date", y)} AND o.status IN ${REVENUE_STATUSES} GROUP BY quarter ORDER BY quarter ASC`,
    };
  }),
  tpl("db_orders_per_weekday", "date_buckets", "medium", (c) => {
    const y = maybe(c, c.inv.years), s = maybe(c, c.inv.statuses);
    if (!y || !s) return null;
    return {
      subject: [`the number of '${s}' orders placed on each day of the week during ${y}`, `for ${y} orders in status '${s}', how many fell on each weekday`],
      returns: [`weekday number (0 = Sunday through 6 = Saturday, as SQLite's %w gives it) and count, ordered by weekday number; days with none omitted`, `day-of-week number 0-6 (Sunday = 0) with its order count, ascending by that number, skipping empty days`],
      columns: ["weekday", "orders"],
      sql: `SELECT CAST(strftime('%w', order_date) AS INTEGER) AS weekday, COUNT(*) AS orders FROM orders WHERE ${yr("order_date", y)} AND status = ${lit(s)} GROUP BY weekday ORDER BY weekday ASC`,
    };
  }),
  tpl("db_captured_per_month", "date_buckets", "medium", (c) => {
    const y = maybe(c, c.inv.years), m = maybe(c, c.inv.methods);
    if (!y || !m) return null;
    return {
      subject: [`the captured amount collected through '${m}' in each month of ${y}, by payment time`, `per month of ${y} (using paid_at), the total of '${m}' payments with status 'captured'`],
      returns: [`month 'YYYY-MM' and amount rounded to 2 decimals, chronological, months without payments omitted`, `the month as YYYY-MM with its total (2 decimals), earliest first; skip empty months`],
      columns: ["month", "captured"],
      sql: `SELECT strftime('%Y-%m', paid_at) AS month, ROUND(SUM(amount), 2) AS captured FROM payments WHERE method = ${lit(m)} AND status = 'captured' AND ${yr("paid_at", y)} GROUP BY month ORDER BY month ASC`,
    };
  }),
  tpl("db_days_to_ship_month", "date_buckets", "hard", (c) => {
    const y = maybe(c, c.inv.years);
    if (!y) return null;
    const k = maybe(c, c.inv.shipCountries);
    const kTxt = c.rng.next() < 0.5 || !k ? "" : ` shipped to '${k}'`;
    return {
      subject: [`for each month of ${y}, the average number of days between order date and ship date over orders${kTxt} that have shipped`, `monthly average days-to-ship (shipped_at minus order_date, in days) for ${y} orders${kTxt}; orders never shipped are excluded`],
      returns: [`order month 'YYYY-MM' and average days rounded to 2 decimals, in month order`, `the month (YYYY-MM, by order date) with mean days to 2 decimals, chronologically`],
      columns: ["month", "avg_days_to_ship"],
      sql: `SELECT strftime('%Y-%m', order_date) AS month, ROUND(AVG(julianday(shipped_at) - julianday(order_date)), 2) AS avg_days_to_ship FROM orders WHERE shipped_at IS NOT NULL AND ${yr("order_date", y)}${kTxt ? ` AND shipping_country = ${lit(k as string)}` : ""} GROUP BY month ORDER BY month ASC`,
    };
  }),
  tpl("db_busiest_month", "date_buckets", "hard", (c) => {
    const y = maybe(c, c.inv.years), k = maybe(c, c.inv.shipCountries);
    if (!y || !k) return null;
    return {
      subject: [`the month of ${y} in which the most orders shipped to '${k}' were placed (any status)`, `which ${y} month had the highest number of orders with shipping country '${k}', all statuses counted`],
      returns: [`the month as 'YYYY-MM' and its order count; if months tie, the earliest one`, `one row: month (YYYY-MM) and count, ties resolved by taking the earlier month`],
      columns: ["month", "orders"],
      sql: `SELECT strftime('%Y-%m', order_date) AS month, COUNT(*) AS orders FROM orders WHERE ${yr("order_date", y)} AND shipping_country = ${lit(k)} GROUP BY month ORDER BY orders DESC, month ASC LIMIT 1`,
    };
  }),
  tpl("db_new_vs_orders_year", "date_buckets", "hard", (c) => {
    const k = maybe(c, c.inv.countries);
    if (!k) return null;
    return {
      subject: [`per year, how many customers from '${k}' placed their very first order in that year`, `for each calendar year, the number of '${k}' customers whose earliest order (any status) is dated that year`],
      returns: [`year and number of first-time buyers, ordered by year`, `the year (YYYY) with the count of new buyers, chronological`],
      columns: ["year", "first_time_buyers"],
      sql: `SELECT strftime('%Y', first_order) AS year, COUNT(*) AS first_time_buyers FROM (SELECT c.customer_id, MIN(o.order_date) AS first_order FROM customers c JOIN orders o ON o.customer_id = c.customer_id WHERE c.country = ${lit(k)} GROUP BY c.customer_id) GROUP BY year ORDER BY year ASC`,
    };
  }),
  // ---- anti-join / existence
  tpl("aj_customers_no_orders", "anti_join", "easy", (c) => {
    const k = maybe(c, c.inv.countries);
    if (!k) return null;
    return {
      subject: [`how many customers from '${k}' have never placed an order`, `the number of '${k}' customers without a single order`],
      returns: oneNumber("the count"),
      columns: ["customers"],
      sql: `SELECT COUNT(*) AS customers FROM customers c WHERE c.country = ${lit(k)} AND NOT EXISTS (SELECT 1 FROM orders o WHERE o.customer_id = c.customer_id)`,
    };
  }),
  tpl("aj_unreviewed_in_category", "anti_join", "easy", (c) => {
    const cat = maybe(c, c.inv.productCategories);
    if (!cat) return null;
    return {
      subject: [`products in the '${cat.name}' category that have never been reviewed`, `which '${cat.name}' products have no reviews at all`],
      returns: [`product names, alphabetical`, `their names sorted A to Z`],
      columns: ["name"],
      sql: `SELECT p.name FROM products p JOIN categories cat ON cat.category_id = p.category_id WHERE cat.name = ${lit(cat.name)} AND p.product_id NOT IN (SELECT product_id FROM reviews) ORDER BY p.name ASC`,
    };
  }),
  tpl("aj_never_ordered", "anti_join", "easy", (c) => {
    const disc = int(c, 0, 1);
    return {
      subject: [`${disc ? "discontinued" : "not discontinued"} products that have never appeared on any order`, `which ${disc ? "discontinued" : "still-sold"} products were never ordered`],
      returns: [`sku and name, sorted by sku`, `each product's sku and name, ordered by sku`],
      columns: ["sku", "name"],
      sql: `SELECT p.sku, p.name FROM products p WHERE p.discontinued = ${disc} AND NOT EXISTS (SELECT 1 FROM order_items oi WHERE oi.product_id = p.product_id) ORDER BY p.sku ASC`,
    };
  }),
  tpl("aj_signups_no_orders_year", "anti_join", "medium", (c) => {
    const k = maybe(c, c.inv.countries), y = maybe(c, c.inv.signupYears), y2 = maybe(c, c.inv.years);
    if (!k || !y || !y2) return null;
    return {
      subject: [`customers from '${k}' who signed up in ${y} and placed no order dated in ${y2}`, `'${k}' customers with a ${y} signup date who have no orders at all during ${y2}`],
      returns: [`customer id and last name, sorted by customer id`, `id and last name of each, ascending by id`],
      columns: ["customer_id", "last_name"],
      sql: `SELECT c.customer_id, c.last_name FROM customers c WHERE c.country = ${lit(k)} AND ${yr("c.signup_date", y)} AND NOT EXISTS (SELECT 1 FROM orders o WHERE o.customer_id = c.customer_id AND ${yr("o.order_date", y2)}) ORDER BY c.customer_id ASC`,
    };
  }),
  tpl("aj_idle_employees", "anti_join", "medium", (c) => {
    const d = maybe(c, c.inv.departments), y = maybe(c, c.inv.years);
    if (!d || !y) return null;
    return {
      subject: [`employees in the ${d} department who were not the sales rep on any order placed in ${y}`, `which ${d} employees handled no ${y} orders as sales rep`],
      returns: [`employee id, first name and last name, by employee id`, `their id and names (first, last), sorted by id`],
      columns: ["employee_id", "first_name", "last_name"],
      sql: `SELECT e.employee_id, e.first_name, e.last_name FROM employees e WHERE e.department = ${lit(d)} AND e.employee_id NOT IN (SELECT sales_rep_id FROM orders WHERE sales_rep_id IS NOT NULL AND ${yr("order_date", y)}) ORDER BY e.employee_id ASC`,
    };
  }),
  tpl("aj_ordered_not_reviewed_year", "anti_join", "medium", (c) => {
    const y = maybe(c, c.inv.years), cat = maybe(c, c.inv.productCategories);
    if (!y || !cat) return null;
    return {
      subject: [`the number of '${cat.name}' products that were ordered in ${y} (any status) but have no review at all`, `how many products from '${cat.name}' appear on ${y} orders yet were never reviewed`],
      returns: oneNumber("the product count"),
      columns: ["products"],
      sql: `SELECT COUNT(DISTINCT p.product_id) AS products FROM products p JOIN categories cat ON cat.category_id = p.category_id JOIN order_items oi ON oi.product_id = p.product_id JOIN orders o ON o.order_id = oi.order_id WHERE cat.name = ${lit(cat.name)} AND ${yr("o.order_date", y)} AND NOT EXISTS (SELECT 1 FROM reviews r WHERE r.product_id = p.product_id)`,
    };
  }),
  tpl("aj_bought_not_reviewed", "anti_join", "hard", (c) => {
    const p = maybe(c, c.inv.orderedProducts);
    if (!p) return null;
    return {
      subject: [`customers who have a delivered order containing '${p.name}' but never wrote a review of that product`, `buyers of '${p.name}' (on an order with status 'delivered') who left no review for it`],
      returns: [`customer id, first name and last name, each once, by customer id`, `distinct customers as id, first name, last name, sorted by id`],
      columns: ["customer_id", "first_name", "last_name"],
      sql: `SELECT DISTINCT c.customer_id, c.first_name, c.last_name FROM customers c JOIN orders o ON o.customer_id = c.customer_id JOIN order_items oi ON oi.order_id = o.order_id JOIN products p ON p.product_id = oi.product_id WHERE p.name = ${lit(p.name)} AND o.status = 'delivered' AND NOT EXISTS (SELECT 1 FROM reviews r WHERE r.customer_id = c.customer_id AND r.product_id = p.product_id) ORDER BY c.customer_id ASC`,
    };
  }),
  tpl("aj_unpaid_orders", "anti_join", "hard", (c) => {
    const s = maybe(c, c.inv.statuses), y = maybe(c, c.inv.years);
    if (!s || !y) return null;
    return {
      subject: [`${y} orders with status '${s}' that have no captured payment (a failed attempt alone does not count as paid)`, `the '${s}' orders from ${y} lacking any payment whose status is 'captured'`],
      returns: [`how many such orders there are, as one number`, `a single count of those orders`],
      columns: ["orders"],
      sql: `SELECT COUNT(*) AS orders FROM orders o WHERE o.status = ${lit(s)} AND ${yr("o.order_date", y)} AND NOT EXISTS (SELECT 1 FROM payments p WHERE p.order_id = o.order_id AND p.status = 'captured')`,
    };
  }),
  tpl("aj_both_years", "anti_join", "hard", (c) => {
    const k = maybe(c, c.inv.countries);
    const ys = c.inv.years;
    if (!k || ys.length < 2) return null;
    const i = int(c, 0, ys.length - 2);
    const [y1, y2] = [ys[i], ys[i + 1]];
    const mode = int(c, 0, 1);
    return {
      subject: [mode ? `customers from '${k}' who ordered in ${y1} but placed no order in ${y2}` : `customers from '${k}' who placed orders in both ${y1} and ${y2}`, mode ? `'${k}' customers with at least one ${y1} order and none in ${y2} (any status)` : `'${k}' customers having at least one order in ${y1} and also at least one in ${y2} (any status)`],
      returns: [`how many such customers, one number`, `a single number: the customer count`],
      columns: ["customers"],
      sql: `SELECT COUNT(*) AS customers FROM customers c WHERE c.country = ${lit(k)} AND EXISTS (SELECT 1 FROM orders o WHERE o.customer_id = c.customer_id AND ${yr("o.order_date", y1)}) AND ${mode ? "NOT " : ""}EXISTS (SELECT 1 FROM orders o WHERE o.customer_id = c.customer_id AND ${yr("o.order_date", y2)})`,
    };
  }),
  // ---- derived metrics
  tpl("dm_product_margin", "derived_metric", "easy", (c) => {
    const p = maybe(c, c.inv.products);
    if (!p) return null;
    return {
      subject: [`the unit margin (list price minus cost) of the product '${p.name}'`, `how much the shop makes per unit of '${p.name}' at list price, i.e. price minus cost`],
      returns: oneNumber("the margin in USD", true),
      columns: ["margin"],
      sql: `SELECT ROUND(price - cost, 2) AS margin FROM products WHERE name = ${lit(p.name)}`,
    };
  }),
  tpl("dm_days_to_ship_order", "derived_metric", "easy", (c) => {
    const o = maybe(c, c.inv.shippedOrders);
    if (!o) return null;
    return {
      subject: [`how many days order ${o.id} took to ship, counted from its order date to its ship date`, `the number of days between order date and shipped_at for order number ${o.id}`],
      returns: [`one number of days`, `just the day count`],
      columns: ["days_to_ship"],
      sql: `SELECT CAST(julianday(shipped_at) - julianday(order_date) AS INTEGER) AS days_to_ship FROM orders WHERE order_id = ${o.id}`,
    };
  }),
  tpl("dm_avg_rating_product", "derived_metric", "easy", (c) => {
    const p = maybe(c, c.inv.reviewedProducts);
    if (!p) return null;
    const lo = int(c, 0, 1);
    return {
      subject: [`the average rating of '${p.name}'${lo ? " over reviews that have a title" : ""}`, `the mean star rating customers gave '${p.name}'${lo ? ", only counting titled reviews" : ""}`],
      returns: oneNumber("the average", true),
      columns: ["avg_rating"],
      sql: `SELECT ROUND(AVG(rating), 2) AS avg_rating FROM reviews WHERE product_id = ${p.id}${lo ? " AND title IS NOT NULL" : ""}`,
    };
  }),
  tpl("dm_order_total", "derived_metric", "medium", (c) => {
    const id = maybe(c, c.inv.orderIds);
    if (id === undefined) return null;
    return {
      subject: [`the total of order ${id}: ${TOTAL_RULE}`, `what order number ${id} came to in USD, computed as the ${TOTAL_RULE}`],
      returns: oneNumber("the total", true),
      columns: ["order_total"],
      sql: `SELECT ROUND(${TOTAL}, 2) AS order_total FROM orders o WHERE o.order_id = ${id}`,
    };
  }),
  tpl("dm_category_share", "derived_metric", "medium", (c) => {
    const y = maybe(c, c.inv.years), cat = maybe(c, c.inv.productCategories);
    if (!y || !cat) return null;
    return {
      subject: [`the share of ${y} item revenue (quantity x unit_price) that came from products in the '${cat.name}' category, ${REVENUE_RULE[0]}`, `what percentage of all ${y} item revenue the '${cat.name}' category contributed, ${REVENUE_RULE[2]}`],
      returns: oneNumber("the percentage (0-100)", true),
      columns: ["share_pct"],
      sql: `SELECT ROUND(100.0 * SUM(CASE WHEN cat.name = ${lit(cat.name)} THEN oi.quantity * oi.unit_price ELSE 0 END) / SUM(oi.quantity * oi.unit_price), 2) AS share_pct FROM order_items oi JOIN orders o ON o.order_id = oi.order_id JOIN products p ON p.product_id = oi.product_id JOIN categories cat ON cat.category_id = p.category_id WHERE ${yr("o.order_date", y)} AND o.status IN ${REVENUE_STATUSES}`,
    };
  }),
  tpl("dm_avg_days_to_ship", "derived_metric", "medium", (c) => {
    const k = maybe(c, c.inv.shipCountries), y = maybe(c, c.inv.years);
    if (!k || !y) return null;
    return {
      subject: [`the average days to ship for ${y} orders going to '${k}' that have shipped`, `mean number of days from order date to ship date, over shipped orders of ${y} with shipping country '${k}'`],
      returns: oneNumber("the average days", true),
      columns: ["avg_days_to_ship"],
      sql: `SELECT ROUND(AVG(julianday(shipped_at) - julianday(order_date)), 2) AS avg_days_to_ship FROM orders WHERE shipped_at IS NOT NULL AND shipping_country = ${lit(k)} AND ${yr("order_date", y)}`,
    };
  }),
  tpl("dm_top_order_totals_month", "derived_metric", "hard", (c) => {
    const m = maybe(c, c.inv.months);
    if (!m) return null;
    const n = int(c, 2, 5);
    return {
      subject: [`the ${n} orders of ${monthName(m)} with the largest order total (${TOTAL_RULE}), any status`, `the top ${n} orders placed in ${monthName(m)} ranked by total = ${TOTAL_RULE}`],
      returns: [`order id and total rounded to 2 decimals, largest first, ties by order id`, `each order's id with its total (2 decimals), ordered by total descending then id`],
      columns: ["order_id", "order_total"],
      sql: `SELECT o.order_id, ROUND(${TOTAL}, 2) AS order_total FROM orders o WHERE strftime('%Y-%m', o.order_date) = '${m}' AND EXISTS (SELECT 1 FROM order_items x WHERE x.order_id = o.order_id) ORDER BY ${TOTAL} DESC, o.order_id ASC LIMIT ${n}`,
    };
  }),
  tpl("dm_margin_pct_by_category", "derived_metric", "hard", (c) => {
    const p = maybe(c, c.inv.parents);
    if (!p) return null;
    return {
      subject: [`for each direct subcategory of '${p.name}', the average margin percentage of the products filed in it (not in its own subcategories), where margin % = (price - cost) / price x 100`, `per direct child category of '${p.name}', the mean of 100 x (price minus cost) / price over products filed in that child itself (deeper subcategories not included)`],
      returns: [`category name and average margin % rounded to 2 decimals, highest first, ties by name`, `the subcategory's name with that average (2 decimals), sorted descending then by name`],
      columns: ["category", "avg_margin_pct"],
      sql: `SELECT c.name AS category, ROUND(AVG(100.0 * (pr.price - pr.cost) / pr.price), 2) AS avg_margin_pct FROM products pr JOIN categories c ON c.category_id = pr.category_id JOIN categories par ON par.category_id = c.parent_id WHERE par.name = ${lit(p.name)} GROUP BY c.category_id, c.name ORDER BY AVG(100.0 * (pr.price - pr.cost) / pr.price) DESC, c.name ASC`,
    };
  }),
  tpl("dm_customer_lifetime", "derived_metric", "hard", (c) => {
    const b = maybe(c, c.inv.buyers);
    if (!b) return null;
    return {
      subject: [`the lifetime spend of customer ${full(b)}: the sum of their order totals (${TOTAL_RULE}), ${REVENUE_RULE[0]}`, `how much ${full(b)} has spent in total, adding up order totals (${TOTAL_RULE}) ${REVENUE_RULE[1]}`],
      returns: [`the amount in USD rounded to 2 decimals, and the number of orders it covers`, `two values: total spend (2 decimals) then the count of counted orders`],
      columns: ["lifetime_spend", "orders"],
      sql: `SELECT ROUND(SUM(${TOTAL}), 2) AS lifetime_spend, COUNT(*) AS orders FROM orders o JOIN customers c ON c.customer_id = o.customer_id WHERE c.first_name = ${lit(b.first)} AND c.last_name = ${lit(b.last)} AND o.status IN ${REVENUE_STATUSES} HAVING COUNT(*) > 0`,
    };
  }),
];
