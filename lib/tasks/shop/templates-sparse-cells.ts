/**
 * Templates for the archetype x difficulty cells the data makes hardest to fill: a few of every archetype,
 * most of them self-joins, anti-joins and hard metrics.
 */
import { REVENUE_RULE, REVENUE_STATUSES, full, int, lit, maybe, oneNumber, tpl, type Template } from "./template.js";

const yr = (col: string, y: string) => `strftime('%Y', ${col}) = '${y}'`;
const SUBTOTAL = "(SELECT SUM(oi.quantity * oi.unit_price) FROM order_items oi WHERE oi.order_id = o.order_id)";
const TOTAL = `(${SUBTOTAL} * (1 - COALESCE(o.discount_pct, 0) / 100.0) + o.shipping_cost)`;
const TOTAL_RULE = "item subtotal after the order discount plus shipping";

/** Category ids in the subtree of `id` (itself included). */
const SUBTREE = (name: string) => `WITH RECURSIVE tree(category_id) AS (SELECT category_id FROM categories WHERE name = ${lit(name)} UNION ALL SELECT c.category_id FROM categories c JOIN tree t ON c.parent_id = t.category_id)`;

export const SPARSE_CELL_TEMPLATES: Template[] = [
  // ---- self-join / hierarchy
  tpl("sj_referrer_orders", "self_join", "medium", (c) => {
    const r = maybe(c, c.inv.referrers);
    if (!r) return null;
    const s = maybe(c, [null, ...c.inv.statuses]);
    const sTxt = s ? ` with status '${s}'` : " of any status";
    return {
      subject: [`the number of orders${sTxt} placed by the customers whom ${full(r)} referred`, `how many orders${sTxt} came from people referred by ${full(r)}`],
      returns: oneNumber("the order count"),
      columns: ["orders"],
      sql: `SELECT COUNT(o.order_id) AS orders FROM customers r JOIN customers c ON c.referred_by = r.customer_id JOIN orders o ON o.customer_id = c.customer_id WHERE r.first_name = ${lit(r.first)} AND r.last_name = ${lit(r.last)}${s ? ` AND o.status = ${lit(s)}` : ""}`,
    };
  }),
  tpl("sj_same_manager", "self_join", "medium", (c) => {
    const e = maybe(c, c.inv.employees.filter((x) => x.manager_id !== null));
    if (!e) return null;
    return {
      subject: [`the colleagues of ${full(e)} who have the same direct manager (${full(e)} excluded)`, `which employees share ${full(e)}'s direct manager, not counting ${full(e)}`],
      returns: [`first name, last name and department, ordered by last name then first name`, `each colleague's first and last name plus department, sorted by last name, first name`],
      columns: ["first_name", "last_name", "department"],
      sql: `SELECT p.first_name, p.last_name, p.department FROM employees e JOIN employees p ON p.manager_id = e.manager_id AND p.employee_id <> e.employee_id WHERE e.first_name = ${lit(e.first)} AND e.last_name = ${lit(e.last)} ORDER BY p.last_name ASC, p.first_name ASC`,
    };
  }),
  tpl("sj_sibling_categories", "self_join", "medium", (c) => {
    const cat = maybe(c, c.inv.categories.filter((x) => x.parent_id !== null));
    if (!cat) return null;
    return {
      subject: [`the categories that have the same parent category as '${cat.name}', other than '${cat.name}' itself`, `the sibling categories of '${cat.name}' (same parent, itself excluded) with their product counts`],
      returns: [`category name and the number of products filed directly in it (0 when it has none), sorted by name`, `each sibling's name with how many products it holds directly, zero included, alphabetical`],
      columns: ["name", "products"],
      sql: `SELECT s.name, COUNT(p.product_id) AS products FROM categories c JOIN categories s ON s.parent_id = c.parent_id AND s.category_id <> c.category_id LEFT JOIN products p ON p.category_id = s.category_id WHERE c.name = ${lit(cat.name)} GROUP BY s.category_id, s.name ORDER BY s.name ASC`,
    };
  }),
  tpl("sj_hired_after_manager", "self_join", "medium", (c) => {
    const n = int(c, 1, 7);
    const d = maybe(c, [null, ...c.inv.departments]);
    const dTxt = d ? ` in the ${d} department` : "";
    return {
      subject: [`employees${dTxt} whose hire year is at least ${n} years after their direct manager's hire year`, `staff${dTxt} who joined ${n} or more calendar years later than the manager they report to (compare hire years)`],
      returns: [`employee id, hire date and the manager's hire date, sorted by employee id`, `id, own hire date, manager hire date; in ascending employee id order`],
      columns: ["employee_id", "hire_date", "manager_hire_date"],
      sql: `SELECT e.employee_id, e.hire_date, m.hire_date AS manager_hire_date FROM employees e JOIN employees m ON m.employee_id = e.manager_id WHERE CAST(strftime('%Y', e.hire_date) AS INTEGER) - CAST(strftime('%Y', m.hire_date) AS INTEGER) >= ${n}${d ? ` AND e.department = ${lit(d)}` : ""} ORDER BY e.employee_id ASC`,
    };
  }),
  tpl("sj_chain_of_command", "self_join", "hard", (c) => {
    const e = maybe(c, c.inv.employees.filter((x) => x.manager_id !== null));
    if (!e) return null;
    return {
      subject: [`the full management chain above ${full(e)}: the direct manager, that person's manager, and so on up to the head of the company`, `everyone ${full(e)} reports to directly or indirectly, up to the top of the company`],
      returns: [`level (1 = direct manager, 2 = the manager's manager, ...), first name and last name, ordered by level`, `rows of level number starting at 1 for the direct manager, then first and last name, sorted by level`],
      columns: ["level", "first_name", "last_name"],
      sql: `WITH RECURSIVE chain(employee_id, manager_id, level) AS (SELECT employee_id, manager_id, 0 FROM employees WHERE first_name = ${lit(e.first)} AND last_name = ${lit(e.last)} UNION ALL SELECT m.employee_id, m.manager_id, chain.level + 1 FROM employees m JOIN chain ON m.employee_id = chain.manager_id) SELECT chain.level, e.first_name, e.last_name FROM chain JOIN employees e ON e.employee_id = chain.employee_id WHERE chain.level > 0 ORDER BY chain.level ASC`,
    };
  }),
  tpl("sj_subtree_headcount", "self_join", "hard", (c) => {
    const m = maybe(c, c.inv.managers);
    if (!m) return null;
    return {
      subject: [`the number of employees below ${full(m)} at any depth of the hierarchy (direct and indirect reports), and their total yearly salary`, `${full(m)}'s whole reporting tree - everyone under them directly or indirectly - as a headcount and a salary total`],
      returns: [`two numbers: headcount, then total salary rounded to 2 decimals`, `the headcount followed by the summed salary (2 decimals)`],
      columns: ["headcount", "total_salary"],
      sql: `WITH RECURSIVE below(employee_id) AS (SELECT e.employee_id FROM employees e JOIN employees m ON e.manager_id = m.employee_id WHERE m.first_name = ${lit(m.first)} AND m.last_name = ${lit(m.last)} UNION ALL SELECT e.employee_id FROM employees e JOIN below b ON e.manager_id = b.employee_id) SELECT COUNT(*) AS headcount, ROUND(SUM(e.salary), 2) AS total_salary FROM below b JOIN employees e ON e.employee_id = b.employee_id`,
    };
  }),
  tpl("sj_category_tree_revenue", "self_join", "hard", (c) => {
    const parentIds = new Set(c.inv.categories.map((x) => x.parent_id).filter((x) => x !== null));
    const cat = maybe(c, c.inv.categories.filter((x) => parentIds.has(x.id)));
    const y = maybe(c, c.inv.years);
    if (!cat || !y) return null;
    return {
      subject: [`the item revenue (quantity x unit_price) in ${y} of all products filed under '${cat.name}' or any category below it at any depth, ${REVENUE_RULE[0]}`, `${y} sales (sum of quantity times charged unit price) across the whole '${cat.name}' category tree, descendants of every level included, ${REVENUE_RULE[1]}`],
      returns: oneNumber("the revenue", true),
      columns: ["revenue"],
      sql: `${SUBTREE(cat.name)} SELECT ROUND(SUM(oi.quantity * oi.unit_price), 2) AS revenue FROM order_items oi JOIN orders o ON o.order_id = oi.order_id JOIN products p ON p.product_id = oi.product_id WHERE p.category_id IN (SELECT category_id FROM tree) AND ${yr("o.order_date", y)} AND o.status IN ${REVENUE_STATUSES}`,
    };
  }),
  tpl("sj_referred_same_city", "self_join", "hard", (c) => {
    const same = int(c, 0, 1) === 1;
    const k = maybe(c, [null, ...c.inv.countries]);
    const kTxt = k ? ` among customers living in '${k}'` : "";
    return {
      subject: [`referred customers who live in ${same ? "the same" : "a different"} city as the customer who referred them${kTxt}, with the number of orders each has placed (0 if none)`, `referred customers${k ? ` living in '${k}'` : ""} whose referrer's city is ${same ? "the same as" : "different from"} their own, plus how many orders each placed, zero included`],
      returns: [`customer id, city and order count, sorted by customer id`, `id, city and number of orders, ascending by id`],
      columns: ["customer_id", "city", "orders"],
      sql: `SELECT c.customer_id, c.city, COUNT(o.order_id) AS orders FROM customers c JOIN customers r ON r.customer_id = c.referred_by LEFT JOIN orders o ON o.customer_id = c.customer_id WHERE c.city ${same ? "=" : "<>"} r.city${k ? ` AND c.country = ${lit(k)}` : ""} GROUP BY c.customer_id, c.city ORDER BY c.customer_id ASC`,
    };
  }),
  // ---- anti-join
  tpl("aj_category_not_ordered_year", "anti_join", "easy", (c) => {
    const cat = maybe(c, c.inv.productCategories), y = maybe(c, c.inv.years);
    if (!cat || !y) return null;
    return {
      subject: [`products of the '${cat.name}' category that nobody ordered in ${y}`, `'${cat.name}' products with no order line on any order dated ${y}`],
      returns: [`product names in alphabetical order`, `the names, A to Z`],
      columns: ["name"],
      sql: `SELECT p.name FROM products p JOIN categories cat ON cat.category_id = p.category_id WHERE cat.name = ${lit(cat.name)} AND NOT EXISTS (SELECT 1 FROM order_items oi JOIN orders o ON o.order_id = oi.order_id WHERE oi.product_id = p.product_id AND ${yr("o.order_date", y)}) ORDER BY p.name ASC`,
    };
  }),
  tpl("aj_customers_no_reviews", "anti_join", "easy", (c) => {
    const k = maybe(c, c.inv.countries);
    if (!k) return null;
    const opt = maybe(c, [null, 0, 1]);
    const optTxt = opt === null ? "" : opt ? " who opted in to marketing" : " who did not opt in to marketing";
    return {
      subject: [`how many customers from '${k}'${optTxt} have never written a review`, `the count of '${k}' customers${optTxt} with no reviews at all`],
      returns: oneNumber("the count"),
      columns: ["customers"],
      sql: `SELECT COUNT(*) AS customers FROM customers c WHERE c.country = ${lit(k)}${opt === null ? "" : ` AND c.marketing_opt_in = ${opt}`} AND NOT EXISTS (SELECT 1 FROM reviews r WHERE r.customer_id = c.customer_id)`,
    };
  }),
  tpl("aj_orders_no_payment_rows", "anti_join", "easy", (c) => {
    const s = maybe(c, c.inv.statuses), y = maybe(c, c.inv.years);
    if (!s || !y) return null;
    return {
      subject: [`orders from ${y} with status '${s}' that have no payment record whatsoever`, `the '${s}' orders dated ${y} for which the payments table holds no row`],
      returns: [`order ids in ascending order`, `their order ids, smallest first`],
      columns: ["order_id"],
      sql: `SELECT o.order_id FROM orders o WHERE o.status = ${lit(s)} AND ${yr("o.order_date", y)} AND NOT EXISTS (SELECT 1 FROM payments p WHERE p.order_id = o.order_id) ORDER BY o.order_id ASC`,
    };
  }),
  tpl("aj_non_managers", "anti_join", "easy", (c) => {
    const d = maybe(c, c.inv.departments);
    if (!d) return null;
    return {
      subject: [`employees of the ${d} department who manage nobody`, `${d} staff without any direct reports`],
      returns: [`first and last names sorted by last name, then first name`, `each one's first name and last name, ordered by last name and first name`],
      columns: ["first_name", "last_name"],
      sql: `SELECT e.first_name, e.last_name FROM employees e WHERE e.department = ${lit(d)} AND NOT EXISTS (SELECT 1 FROM employees x WHERE x.manager_id = e.employee_id) ORDER BY e.last_name ASC, e.first_name ASC`,
    };
  }),
  tpl("aj_customers_never_status", "anti_join", "medium", (c) => {
    const k = maybe(c, c.inv.countries), s = maybe(c, ["cancelled", "refunded", "delivered", "pending"]);
    if (!k || !s) return null;
    return {
      subject: [`customers from '${k}' who have ordered at least once but never had an order with status '${s}'`, `'${k}' buyers (one or more orders) none of whose orders is in status '${s}'`],
      returns: [`customer id and last name, by customer id`, `id and last name, ascending id`],
      columns: ["customer_id", "last_name"],
      sql: `SELECT c.customer_id, c.last_name FROM customers c WHERE c.country = ${lit(k)} AND EXISTS (SELECT 1 FROM orders o WHERE o.customer_id = c.customer_id) AND NOT EXISTS (SELECT 1 FROM orders o WHERE o.customer_id = c.customer_id AND o.status = ${lit(s)}) ORDER BY c.customer_id ASC`,
    };
  }),
  // ---- date buckets
  tpl("db_reviews_per_month", "date_buckets", "medium", (c) => {
    const y = maybe(c, c.inv.reviewYears), lo = int(c, 1, 5);
    if (!y) return null;
    return {
      subject: [`the number of reviews rated ${lo} or more and their average rating for each month of ${y}`, `per month of ${y}, how many reviews with at least ${lo} stars were written and what they averaged`],
      returns: [`month 'YYYY-MM', count and average rating rounded to 2 decimals, chronological; months without such reviews omitted`, `month (YYYY-MM), review count, mean rating (2 decimals), earliest month first, skipping empty months`],
      columns: ["month", "reviews", "avg_rating"],
      sql: `SELECT strftime('%Y-%m', created_at) AS month, COUNT(*) AS reviews, ROUND(AVG(rating), 2) AS avg_rating FROM reviews WHERE rating >= ${lo} AND ${yr("created_at", y)} GROUP BY month ORDER BY month ASC`,
    };
  }),
  tpl("db_status_by_year", "date_buckets", "medium", (c) => {
    const k = maybe(c, c.inv.shipCountries);
    if (!k) return null;
    return {
      subject: [`for orders shipped to '${k}', the number of orders per order year and status`, `a year-by-status count of orders whose shipping country is '${k}'`],
      returns: [`year, status and count, sorted by year then status`, `rows of year (YYYY), status and order count, ordered by year and then status name`],
      columns: ["year", "status", "orders"],
      sql: `SELECT strftime('%Y', order_date) AS year, status, COUNT(*) AS orders FROM orders WHERE shipping_country = ${lit(k)} GROUP BY year, status ORDER BY year ASC, status ASC`,
    };
  }),
  tpl("db_shipments_per_month", "date_buckets", "medium", (c) => {
    const y = maybe(c, c.inv.years);
    if (!y) return null;
    const k = maybe(c, [null, ...c.inv.shipCountries]);
    return {
      subject: [`the number of orders that shipped in each month of ${y}, bucketed by the ship date rather than the order date${k ? `, for shipping country '${k}'` : ""}`, `monthly shipment counts for ${y} based on shipped_at${k ? ` (orders going to '${k}' only)` : ""}`],
      returns: [`ship month 'YYYY-MM' and count, chronological, months without shipments omitted`, `the month (YYYY-MM) of shipping and the count, earliest first`],
      columns: ["ship_month", "orders"],
      sql: `SELECT strftime('%Y-%m', shipped_at) AS ship_month, COUNT(*) AS orders FROM orders WHERE shipped_at IS NOT NULL AND ${yr("shipped_at", y)}${k ? ` AND shipping_country = ${lit(k)}` : ""} GROUP BY ship_month ORDER BY ship_month ASC`,
    };
  }),
  // ---- multi-table join, hard
  tpl("jm_category_by_country", "join_multi", "hard", (c) => {
    const cat = maybe(c, c.inv.productCategories), y = maybe(c, [null, ...c.inv.years]);
    if (!cat) return null;
    const yTxt = y ? ` in ${y}` : "";
    return {
      subject: [`for products in '${cat.name}', per customer home country: how many distinct customers bought them${yTxt} and how many units, ${REVENUE_RULE[0]}`, `'${cat.name}' purchases${yTxt} broken down by the buyer's country (customers.country) as distinct buyers and total units, ${REVENUE_RULE[2]}`],
      returns: [`country, buyers and units, most units first, ties by country`, `country code, distinct customer count and units, sorted by units descending then country`],
      columns: ["country", "buyers", "units"],
      sql: `SELECT c.country, COUNT(DISTINCT c.customer_id) AS buyers, SUM(oi.quantity) AS units FROM customers c JOIN orders o ON o.customer_id = c.customer_id JOIN order_items oi ON oi.order_id = o.order_id JOIN products p ON p.product_id = oi.product_id JOIN categories cat ON cat.category_id = p.category_id WHERE cat.name = ${lit(cat.name)} AND o.status IN ${REVENUE_STATUSES}${y ? ` AND ${yr("o.order_date", y)}` : ""} GROUP BY c.country ORDER BY units DESC, c.country ASC`,
    };
  }),
  tpl("jm_rep_units_category", "join_multi", "hard", (c) => {
    const cat = maybe(c, c.inv.parents), y = maybe(c, c.inv.years);
    if (!cat || !y) return null;
    return {
      subject: [`per sales rep, the units of products filed in a direct subcategory of '${cat.name}' (not deeper) sold on ${y} orders they handled, ${REVENUE_RULE[0]}`, `how many units of products filed in '${cat.name}''s direct child categories (deeper levels excluded) each sales rep sold in ${y}, ${REVENUE_RULE[1]}; online orders without a rep are left out`],
      returns: [`rep last name and units, most units first, ties by last name`, `the employee's last name with the unit total, sorted by units descending then last name`],
      columns: ["last_name", "units"],
      sql: `SELECT e.last_name, SUM(oi.quantity) AS units FROM employees e JOIN orders o ON o.sales_rep_id = e.employee_id JOIN order_items oi ON oi.order_id = o.order_id JOIN products p ON p.product_id = oi.product_id JOIN categories cat ON cat.category_id = p.category_id JOIN categories par ON par.category_id = cat.parent_id WHERE par.name = ${lit(cat.name)} AND ${yr("o.order_date", y)} AND o.status IN ${REVENUE_STATUSES} GROUP BY e.employee_id, e.last_name ORDER BY units DESC, e.last_name ASC`,
    };
  }),
  // ---- NULL semantics, hard
  tpl("ns_ship_state_by_status", "null_semantics", "hard", (c) => {
    const k = maybe(c, c.inv.shipCountries);
    if (!k) return null;
    return {
      subject: [`for orders going to '${k}', per status: how many have shipped and how many have no ship date`, `a per-status split of '${k}' orders into shipped (ship date present) and not shipped (ship date missing)`],
      returns: [`status, shipped count and unshipped count, by status name`, `status with the two counts (shipped first), alphabetical by status`],
      columns: ["status", "shipped", "not_shipped"],
      sql: `SELECT status, COUNT(shipped_at) AS shipped, COUNT(*) - COUNT(shipped_at) AS not_shipped FROM orders WHERE shipping_country = ${lit(k)} GROUP BY status ORDER BY status ASC`,
    };
  }),
  tpl("ns_referral_share_country", "null_semantics", "hard", (c) => {
    const n = int(c, 1, 6);
    const y = maybe(c, [null, ...c.inv.signupYears]);
    return {
      subject: [`for every customer country with at least ${n} customers${y ? ` who signed up in ${y}` : ""}, the percentage of those customers that were not referred by anyone`, `per country having ${n}+ customers${y ? ` with a ${y} signup` : ""}, what percent of them have no referrer`],
      returns: [`country and percentage rounded to 2 decimals, sorted by country`, `country code with the unreferred share in percent (2 decimals), alphabetical`],
      columns: ["country", "unreferred_pct"],
      sql: `SELECT country, ROUND(100.0 * SUM(CASE WHEN referred_by IS NULL THEN 1 ELSE 0 END) / COUNT(*), 2) AS unreferred_pct FROM customers${y ? ` WHERE ${yr("signup_date", y)}` : ""} GROUP BY country HAVING COUNT(*) >= ${n} ORDER BY country ASC`,
    };
  }),
  // ---- derived metrics, hard
  tpl("dm_avg_order_total", "derived_metric", "hard", (c) => {
    const k = maybe(c, c.inv.shipCountries), y = maybe(c, c.inv.years);
    if (!k || !y) return null;
    return {
      subject: [`the average order total (${TOTAL_RULE}) of ${y} orders shipped to '${k}', ${REVENUE_RULE[0]}`, `the mean value per order, defined as ${TOTAL_RULE}, for '${k}' orders placed in ${y}, ${REVENUE_RULE[1]}`],
      returns: [`the average rounded to 2 decimals and the number of orders averaged`, `two values: average total (2 decimals), then the order count`],
      columns: ["avg_order_total", "orders"],
      sql: `SELECT ROUND(AVG(${TOTAL}), 2) AS avg_order_total, COUNT(*) AS orders FROM orders o WHERE o.shipping_country = ${lit(k)} AND ${yr("o.order_date", y)} AND o.status IN ${REVENUE_STATUSES} HAVING COUNT(*) > 0`,
    };
  }),
  tpl("dm_gross_margin_category", "derived_metric", "hard", (c) => {
    const cat = maybe(c, c.inv.productCategories), y = maybe(c, c.inv.years);
    if (!cat || !y) return null;
    return {
      subject: [`the gross margin earned on '${cat.name}' products in ${y}: the sum over order lines of quantity x (charged unit price - product cost), before order discounts, ${REVENUE_RULE[0]}`, `${y} gross profit of the '${cat.name}' category, computed per order line as quantity times (unit_price minus products.cost), ignoring discounts and shipping, ${REVENUE_RULE[2]}`],
      returns: oneNumber("the margin in USD", true),
      columns: ["gross_margin"],
      sql: `SELECT ROUND(SUM(oi.quantity * (oi.unit_price - p.cost)), 2) AS gross_margin FROM order_items oi JOIN orders o ON o.order_id = oi.order_id JOIN products p ON p.product_id = oi.product_id JOIN categories cat ON cat.category_id = p.category_id WHERE cat.name = ${lit(cat.name)} AND ${yr("o.order_date", y)} AND o.status IN ${REVENUE_STATUSES}`,
    };
  }),
  tpl("dm_discount_given", "derived_metric", "hard", (c) => {
    const y = maybe(c, c.inv.years), k = maybe(c, c.inv.shipCountries);
    if (!y || !k) return null;
    return {
      subject: [`the total discount amount given away in ${y} on orders shipped to '${k}', i.e. item subtotal x discount_pct / 100 summed over discounted orders, ${REVENUE_RULE[0]}`, `how many dollars of discount '${k}' orders from ${y} received in total (subtotal times discount percentage / 100), ${REVENUE_RULE[1]}`],
      returns: oneNumber("the discount in USD", true),
      columns: ["discount_total"],
      sql: `SELECT ROUND(SUM(${SUBTOTAL} * o.discount_pct / 100.0), 2) AS discount_total FROM orders o WHERE o.discount_pct IS NOT NULL AND o.shipping_country = ${lit(k)} AND ${yr("o.order_date", y)} AND o.status IN ${REVENUE_STATUSES}`,
    };
  }),
  // ---- other thin cells
  tpl("gh_products_rating_floor", "group_having", "medium", (c) => {
    const k = int(c, 2, 4), r = int(c, 2, 4);
    return {
      subject: [`products with at least ${k} reviews whose lowest rating is ${r} or higher`, `which products have ${k}+ reviews and never got fewer than ${r} stars`],
      returns: [`product id, review count and minimum rating, sorted by product id`, `id, number of reviews and lowest rating, ascending by id`],
      columns: ["product_id", "reviews", "min_rating"],
      sql: `SELECT product_id, COUNT(*) AS reviews, MIN(rating) AS min_rating FROM reviews GROUP BY product_id HAVING COUNT(*) >= ${k} AND MIN(rating) >= ${r} ORDER BY product_id ASC`,
    };
  }),
  tpl("gh_country_avg_shipping", "group_having", "hard", (c) => {
    const y = maybe(c, c.inv.years), n = int(c, 2, 12), s = int(c, 3, 12);
    if (!y) return null;
    return {
      subject: [`shipping countries with at least ${n} orders in ${y} whose average shipping cost over those orders exceeds ${s} USD`, `which destination countries had ${n} or more ${y} orders and paid on average more than ${s} USD shipping`],
      returns: [`country, order count and average shipping cost rounded to 2 decimals, highest average first, ties by country`, `country code, number of orders, mean shipping (2 decimals), sorted by the mean descending then country`],
      columns: ["shipping_country", "orders", "avg_shipping"],
      sql: `SELECT shipping_country, COUNT(*) AS orders, ROUND(AVG(shipping_cost), 2) AS avg_shipping FROM orders WHERE ${yr("order_date", y)} GROUP BY shipping_country HAVING COUNT(*) >= ${n} AND AVG(shipping_cost) > ${s} ORDER BY AVG(shipping_cost) DESC, shipping_country ASC`,
    };
  }),
  tpl("j2_order_lines_detail", "join_two", "medium", (c) => {
    const id = maybe(c, c.inv.orderIds);
    if (id === undefined) return null;
    return {
      subject: [`the lines of order ${id} with the product names`, `what was bought on order number ${id}, line by line`],
      returns: [`product name, quantity and line amount (quantity x unit_price, rounded to 2 decimals), sorted by product name`, `each line's product name, quantity and quantity times charged price (2 decimals), alphabetical by product`],
      columns: ["name", "quantity", "line_amount"],
      sql: `SELECT p.name, oi.quantity, ROUND(oi.quantity * oi.unit_price, 2) AS line_amount FROM order_items oi JOIN products p ON p.product_id = oi.product_id WHERE oi.order_id = ${id} ORDER BY p.name ASC, oi.order_item_id ASC`,
    };
  }),
  tpl("j2_price_changes", "join_two", "hard", (c) => {
    const cat = maybe(c, c.inv.productCategories);
    if (!cat) return null;
    const below = int(c, 0, 1) === 1;
    return {
      subject: [`'${cat.name}' products that were sold at least once at a unit price ${below ? "below" : "above"} their current list price, with how many such order lines`, `for products in '${cat.name}', those with order lines charged ${below ? "less" : "more"} than products.price, and the number of those lines`],
      returns: [`product name and line count, most lines first, ties by name`, `name and number of such lines, ordered by the count descending then name`],
      columns: ["name", "lines"],
      sql: `SELECT p.name, COUNT(*) AS lines FROM order_items oi JOIN products p ON p.product_id = oi.product_id WHERE p.category_id = (SELECT category_id FROM categories WHERE name = ${lit(cat.name)}) AND oi.unit_price ${below ? "<" : ">"} p.price GROUP BY p.product_id, p.name ORDER BY lines DESC, p.name ASC`,
    };
  }),
  tpl("agg_payment_stats_method", "aggregation", "hard", (c) => {
    const m = maybe(c, c.inv.methods), y = maybe(c, c.inv.years);
    if (!m || !y) return null;
    return {
      subject: [`for '${m}' payments made in ${y}: how many attempts there were, how many failed, and the failure rate`, `the ${y} failure statistics of the '${m}' payment method - attempts, failures and failure percentage`],
      returns: [`three values: attempts, failed attempts, and failed as a percentage of attempts rounded to 2 decimals`, `attempt count, failure count and failure percent (2 decimals), in that order`],
      columns: ["attempts", "failed", "failed_pct"],
      sql: `SELECT COUNT(*) AS attempts, SUM(CASE WHEN status = 'failed' THEN 1 ELSE 0 END) AS failed, ROUND(100.0 * SUM(CASE WHEN status = 'failed' THEN 1 ELSE 0 END) / COUNT(*), 2) AS failed_pct FROM payments WHERE method = ${lit(m)} AND ${yr("paid_at", y)}`,
    };
  }),
  tpl("top_recent_reviews_product", "top_n", "hard", (c) => {
    const k = maybe(c, c.inv.countries), n = int(c, 2, 5);
    if (!k) return null;
    return {
      subject: [`the ${n} most recent reviews written by customers from '${k}', with the reviewed product's name and a title placeholder '(no title)' when the review has none`, `the latest ${n} reviews by '${k}' customers, showing product name and the title, using '(no title)' for missing titles`],
      returns: [`review date, product name, rating and title, newest first, ties by review id`, `created date, product name, rating, title; sorted by date descending then review id`],
      columns: ["created_at", "product", "rating", "title"],
      sql: `SELECT r.created_at, p.name AS product, r.rating, COALESCE(r.title, '(no title)') AS title FROM reviews r JOIN customers c ON c.customer_id = r.customer_id JOIN products p ON p.product_id = r.product_id WHERE c.country = ${lit(k)} ORDER BY r.created_at DESC, r.review_id ASC LIMIT ${n}`,
    };
  }),
];
