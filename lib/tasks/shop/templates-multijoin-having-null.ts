/** Templates: multi-table joins, GROUP BY/HAVING, NULL semantics. */
import { FILED, ROOT_CTE, REVENUE_RULE, REVENUE_STATUSES, full, int, lit, maybe, monthName, oneNumber, tpl, type Template } from "./template.js";

const yr = (col: string, y: string) => `strftime('%Y', ${col}) = '${y}'`;
const ITEMS = "order_items oi JOIN orders o ON o.order_id = oi.order_id JOIN products p ON p.product_id = oi.product_id";

export const MULTIJOIN_HAVING_NULL_TEMPLATES: Template[] = [
  // ---- multi-table join (3+ tables)
  tpl("jm_products_bought_by", "join_multi", "easy", (c) => {
    const b = maybe(c, c.inv.buyers);
    if (!b) return null;
    return {
      subject: [`the distinct products that customer ${full(b)} has ever ordered, whatever the order status`, `every different product appearing on any order of ${full(b)} (all statuses)`],
      returns: [`product names without repeats, alphabetical`, `each product name once, sorted A to Z`],
      columns: ["product_name"],
      sql: `SELECT DISTINCT p.name AS product_name FROM customers c JOIN orders o ON o.customer_id = c.customer_id JOIN order_items oi ON oi.order_id = o.order_id JOIN products p ON p.product_id = oi.product_id WHERE c.first_name = ${lit(b.first)} AND c.last_name = ${lit(b.last)} ORDER BY p.name ASC`,
    };
  }),
  tpl("jm_buyers_of_product", "join_multi", "easy", (c) => {
    const p = maybe(c, c.inv.orderedProducts);
    if (!p) return null;
    return {
      subject: [`the customers who have ordered '${p.name}' at least once (any order status)`, `who bought '${p.name}': every customer with an order line for it, regardless of status`],
      returns: [`customer id, first name and last name, each customer once, sorted by customer id`, `distinct customers as id, first and last name, in ascending id order`],
      columns: ["customer_id", "first_name", "last_name"],
      sql: `SELECT DISTINCT c.customer_id, c.first_name, c.last_name FROM customers c JOIN orders o ON o.customer_id = c.customer_id JOIN order_items oi ON oi.order_id = o.order_id JOIN products p ON p.product_id = oi.product_id WHERE p.name = ${lit(p.name)} ORDER BY c.customer_id ASC`,
    };
  }),
  tpl("jm_categories_of_order", "join_multi", "easy", (c) => {
    const id = maybe(c, c.inv.orderIds);
    if (id === undefined) return null;
    return {
      subject: [`the product categories represented in order number ${id}`, `which categories the items of order ${id} belong to`],
      returns: [`distinct category names in alphabetical order`, `each category name once, sorted A-Z`],
      columns: ["category"],
      sql: `SELECT DISTINCT cat.name AS category FROM order_items oi JOIN products p ON p.product_id = oi.product_id JOIN categories cat ON cat.category_id = p.category_id WHERE oi.order_id = ${id} ORDER BY cat.name ASC`,
    };
  }),
  tpl("jm_units_per_category_year", "join_multi", "medium", (c) => {
    const y = maybe(c, c.inv.years), k = maybe(c, c.inv.shipCountries);
    if (!y || !k) return null;
    return {
      subject: [`the units sold per product category on ${y} orders shipped to '${k}', every order status counted (${FILED})`, `for orders from ${y} with shipping country '${k}' (any status), the total quantity per category, where ${FILED}`],
      returns: [`category name and units, most units first, ties by category name`, `category and summed quantity, sorted by quantity descending then category name`],
      columns: ["category", "units"],
      sql: `SELECT cat.name AS category, SUM(oi.quantity) AS units FROM ${ITEMS} JOIN categories cat ON cat.category_id = p.category_id WHERE ${yr("o.order_date", y)} AND o.shipping_country = ${lit(k)} GROUP BY cat.category_id, cat.name ORDER BY units DESC, cat.name ASC`,
    };
  }),
  tpl("jm_customers_country_category", "join_multi", "medium", (c) => {
    const k = maybe(c, c.inv.countries), cat = maybe(c, c.inv.productCategories);
    if (!k || !cat) return null;
    return {
      subject: [`the number of different customers from '${k}' who ordered at least one product in the '${cat.name}' category (any order status)`, `how many distinct '${k}' customers have bought something from '${cat.name}', counting all orders`],
      returns: oneNumber("the customer count"),
      columns: ["customers"],
      sql: `SELECT COUNT(DISTINCT c.customer_id) AS customers FROM customers c JOIN orders o ON o.customer_id = c.customer_id JOIN order_items oi ON oi.order_id = o.order_id JOIN products p ON p.product_id = oi.product_id JOIN categories cat ON cat.category_id = p.category_id WHERE c.country = ${lit(k)} AND cat.name = ${lit(cat.name)}`,
    };
  }),
  tpl("jm_rating_country_category", "join_multi", "medium", (c) => {
    const k = maybe(c, c.inv.countries), cat = maybe(c, c.inv.productCategories);
    if (!k || !cat) return null;
    return {
      subject: [`the average rating that customers from '${k}' gave to products of the '${cat.name}' category`, `the mean review score left by '${k}' customers on '${cat.name}' products`],
      returns: oneNumber("the average rating", true),
      columns: ["avg_rating"],
      sql: `SELECT ROUND(AVG(r.rating), 2) AS avg_rating FROM reviews r JOIN customers c ON c.customer_id = r.customer_id JOIN products p ON p.product_id = r.product_id JOIN categories cat ON cat.category_id = p.category_id WHERE c.country = ${lit(k)} AND cat.name = ${lit(cat.name)}`,
    };
  }),
  tpl("jm_revenue_top_category", "join_multi", "hard", (c) => {
    const y = maybe(c, c.inv.years);
    if (!y) return null;
    return {
      subject: [`item revenue (quantity x unit_price, no discount or shipping) in ${y} per top-level category, where products in subcategories at any depth count toward their top-level ancestor, ${REVENUE_RULE[0]}`, `for ${y}, the sum of quantity times charged unit price rolled up to top-level categories (sales of every nested subcategory belong to its top-level ancestor), ${REVENUE_RULE[1]}`],
      returns: [`top-level category name and revenue rounded to 2 decimals, sorted by category name`, `the parent category's name with its revenue (2 decimals), alphabetical by name`],
      columns: ["top_category", "revenue"],
      sql: `${ROOT_CTE} SELECT top.name AS top_category, ROUND(SUM(oi.quantity * oi.unit_price), 2) AS revenue FROM ${ITEMS} JOIN root ON root.category_id = p.category_id JOIN categories top ON top.category_id = root.top_id WHERE ${yr("o.order_date", y)} AND o.status IN ${REVENUE_STATUSES} GROUP BY top.category_id, top.name ORDER BY top.name ASC`,
    };
  }),
  tpl("jm_rep_discounted_revenue", "join_multi", "hard", (c) => {
    const r = maybe(c, c.inv.reps), y = maybe(c, c.inv.years);
    if (!r || !y) return null;
    return {
      subject: [`the discounted item revenue (quantity x unit_price after the order's discount, shipping excluded) of ${y} orders handled by sales rep ${full(r)}, ${REVENUE_RULE[2]}`, `for orders where ${full(r)} was the sales rep and the order date is in ${y}, the item subtotal after discount and without shipping, ${REVENUE_RULE[0]}`],
      returns: oneNumber("the amount in USD", true),
      columns: ["revenue"],
      sql: `SELECT ROUND(SUM(oi.quantity * oi.unit_price * (1 - COALESCE(o.discount_pct, 0) / 100.0)), 2) AS revenue FROM employees e JOIN orders o ON o.sales_rep_id = e.employee_id JOIN order_items oi ON oi.order_id = o.order_id WHERE e.first_name = ${lit(r.first)} AND e.last_name = ${lit(r.last)} AND ${yr("o.order_date", y)} AND o.status IN ${REVENUE_STATUSES}`,
    };
  }),
  tpl("jm_method_customers_category", "join_multi", "hard", (c) => {
    const cat = maybe(c, c.inv.productCategories), k = maybe(c, c.inv.countries);
    if (!cat || !k) return null;
    return {
      subject: [`per payment method, the number of distinct '${k}' customers with a captured payment on an order that contains a '${cat.name}' product`, `for each payment method, how many different customers from '${k}' paid (status 'captured') for orders including at least one item from '${cat.name}'`],
      returns: [`method and customer count, sorted by method name; methods with no such customer omitted`, `payment method with its distinct-customer count, alphabetical by method (leave out methods with zero)`],
      columns: ["method", "customers"],
      sql: `SELECT pay.method, COUNT(DISTINCT c.customer_id) AS customers FROM customers c JOIN orders o ON o.customer_id = c.customer_id JOIN payments pay ON pay.order_id = o.order_id WHERE c.country = ${lit(k)} AND pay.status = 'captured' AND EXISTS (SELECT 1 FROM order_items oi JOIN products p ON p.product_id = oi.product_id JOIN categories cat ON cat.category_id = p.category_id WHERE oi.order_id = o.order_id AND cat.name = ${lit(cat.name)}) GROUP BY pay.method ORDER BY pay.method ASC`,
    };
  }),
  // ---- GROUP BY / HAVING
  tpl("gh_countries_many_customers", "group_having", "easy", (c) => {
    const n = int(c, 1, 12);
    return {
      subject: [`the customer countries that have more than ${n} customers`, `which country codes count over ${n} customers`],
      returns: [`country code and number of customers, largest first, ties by country code`, `the country with its customer count, sorted by count descending then country`],
      columns: ["country", "customers"],
      sql: `SELECT country, COUNT(*) AS customers FROM customers GROUP BY country HAVING COUNT(*) > ${n} ORDER BY customers DESC, country ASC`,
    };
  }),
  tpl("gh_statuses_year", "group_having", "easy", (c) => {
    const y = maybe(c, c.inv.years);
    if (!y) return null;
    const n = int(c, 1, 8) * 5;
    return {
      subject: [`order statuses that occur at least ${n} times among orders placed in ${y}`, `which statuses have ${n} or more orders dated ${y}`],
      returns: [`status and order count, sorted by status name`, `each such status with its count, alphabetical by status`],
      columns: ["status", "orders"],
      sql: `SELECT status, COUNT(*) AS orders FROM orders WHERE ${yr("order_date", y)} GROUP BY status HAVING COUNT(*) >= ${n} ORDER BY status ASC`,
    };
  }),
  tpl("gh_methods_failed", "group_having", "easy", (c) => {
    const s = maybe(c, c.inv.paymentStatuses);
    if (!s) return null;
    const n = int(c, 0, 6) * 3;
    return {
      subject: [`payment methods with more than ${n} payments in status '${s}'`, `the methods that have over ${n} '${s}' payments`],
      returns: [`method and count, most first, ties by method name`, `the method name and number of such payments, ordered by that number descending then method`],
      columns: ["method", "payments"],
      sql: `SELECT method, COUNT(*) AS payments FROM payments WHERE status = ${lit(s)} GROUP BY method HAVING COUNT(*) > ${n} ORDER BY payments DESC, method ASC`,
    };
  }),
  tpl("gh_frequent_customers_year", "group_having", "medium", (c) => {
    const y = maybe(c, c.inv.years);
    if (!y) return null;
    const n = int(c, 2, 5);
    return {
      subject: [`customers who placed at least ${n} orders (any status) during ${y}`, `which customer ids have ${n} or more orders dated in ${y}, all statuses counted`],
      returns: [`customer id and their order count for that year, most orders first, ties by customer id`, `id with number of orders, sorted by the number descending and then id ascending`],
      columns: ["customer_id", "orders"],
      sql: `SELECT customer_id, COUNT(*) AS orders FROM orders WHERE ${yr("order_date", y)} GROUP BY customer_id HAVING COUNT(*) >= ${n} ORDER BY orders DESC, customer_id ASC`,
    };
  }),
  tpl("gh_popular_products", "group_having", "medium", (c) => {
    const n = int(c, 3, 15);
    return {
      subject: [`products that appear on at least ${n} different orders (any status)`, `which product ids were ordered in ${n} or more distinct orders`],
      returns: [`product id and number of distinct orders, most first, ties by product id`, `the product id with its distinct order count, ordered by that count descending then product id`],
      columns: ["product_id", "orders"],
      sql: `SELECT product_id, COUNT(DISTINCT order_id) AS orders FROM order_items GROUP BY product_id HAVING COUNT(DISTINCT order_id) >= ${n} ORDER BY orders DESC, product_id ASC`,
    };
  }),
  tpl("gh_cities_country", "group_having", "medium", (c) => {
    const k = maybe(c, c.inv.countries);
    if (!k) return null;
    const n = int(c, 1, 4);
    return {
      subject: [`cities in '${k}' where at least ${n} customers live and at least one of them opted in to marketing`, `the '${k}' cities with ${n}+ customers, of whom one or more accepted marketing e-mail`],
      returns: [`city, customer count and opted-in count, sorted by city`, `the city with its number of customers and number opted in, alphabetical by city`],
      columns: ["city", "customers", "opted_in"],
      sql: `SELECT city, COUNT(*) AS customers, SUM(marketing_opt_in) AS opted_in FROM customers WHERE country = ${lit(k)} GROUP BY city HAVING COUNT(*) >= ${n} AND SUM(marketing_opt_in) >= 1 ORDER BY city ASC`,
    };
  }),
  tpl("gh_category_margin", "group_having", "hard", (c) => {
    const m = int(c, 1, 12) * 5;
    return {
      subject: [`categories whose products have an average unit margin (price minus cost) above ${m} USD, counting only products that are not discontinued (${FILED})`, `which categories' still-sold products earn on average more than ${m} USD margin per unit (price - cost), where ${FILED}`],
      returns: [`category name and average margin rounded to 2 decimals, highest first, ties by name`, `the category and its mean margin (2 decimals), sorted by margin descending then category name`],
      columns: ["category", "avg_margin"],
      sql: `SELECT cat.name AS category, ROUND(AVG(p.price - p.cost), 2) AS avg_margin FROM products p JOIN categories cat ON cat.category_id = p.category_id WHERE p.discontinued = 0 GROUP BY cat.category_id, cat.name HAVING AVG(p.price - p.cost) > ${m} ORDER BY AVG(p.price - p.cost) DESC, cat.name ASC`,
    };
  }),
  tpl("gh_big_spenders_year", "group_having", "hard", (c) => {
    const y = maybe(c, c.inv.years);
    if (!y) return null;
    const n = int(c, 2, 20) * 50;
    return {
      subject: [`customers whose captured payments with a paid_at date in ${y} add up to more than ${n} USD (failed and refunded payments excluded)`, `which customers paid over ${n} USD in ${y}, summing only payments with status 'captured'`],
      returns: [`customer id, last name and the captured total rounded to 2 decimals, largest total first, ties by customer id`, `id, last name and total (2 decimals), sorted by the total descending then id`],
      columns: ["customer_id", "last_name", "captured_total"],
      sql: `SELECT c.customer_id, c.last_name, ROUND(SUM(p.amount), 2) AS captured_total FROM customers c JOIN orders o ON o.customer_id = c.customer_id JOIN payments p ON p.order_id = o.order_id WHERE p.status = 'captured' AND ${yr("p.paid_at", y)} GROUP BY c.customer_id, c.last_name HAVING SUM(p.amount) > ${n} ORDER BY SUM(p.amount) DESC, c.customer_id ASC`,
    };
  }),
  tpl("gh_reps_discounts", "group_having", "hard", (c) => {
    const n = int(c, 1, 8), y = maybe(c, c.inv.years);
    if (!y) return null;
    return {
      subject: [`sales reps who handled more than ${n} discounted orders placed in ${y} (orders without a discount do not count)`, `which employees were the sales rep on over ${n} orders from ${y} that carry a discount`],
      returns: [`employee first name, last name and the number of discounted orders, most first, ties by last name`, `the rep's first and last name with that count, ordered by count descending then last name`],
      columns: ["first_name", "last_name", "discounted_orders"],
      sql: `SELECT e.first_name, e.last_name, COUNT(*) AS discounted_orders FROM employees e JOIN orders o ON o.sales_rep_id = e.employee_id WHERE o.discount_pct IS NOT NULL AND ${yr("o.order_date", y)} GROUP BY e.employee_id, e.first_name, e.last_name HAVING COUNT(*) > ${n} ORDER BY discounted_orders DESC, e.last_name ASC`,
    };
  }),
  // ---- NULL semantics
  tpl("ns_no_discount_year", "null_semantics", "easy", (c) => {
    const y = maybe(c, c.inv.years), k = maybe(c, c.inv.shipCountries);
    if (!y || !k) return null;
    return {
      subject: [`the number of ${y} orders shipped to '${k}' that have no discount at all`, `how many orders dated ${y} with shipping country '${k}' carry no discount (discount missing)`],
      returns: oneNumber("that number of orders"),
      columns: ["orders"],
      sql: `SELECT COUNT(*) AS orders FROM orders WHERE discount_pct IS NULL AND ${yr("order_date", y)} AND shipping_country = ${lit(k)}`,
    };
  }),
  tpl("ns_not_referred", "null_semantics", "easy", (c) => {
    const k = maybe(c, c.inv.countries), y = maybe(c, c.inv.signupYears);
    if (!k || !y) return null;
    return {
      subject: [`how many customers from '${k}' who joined in ${y} were not referred by another customer`, `the count of ${y} sign-ups in '${k}' without a referrer`],
      returns: oneNumber("the count"),
      columns: ["customers"],
      sql: `SELECT COUNT(*) AS customers FROM customers WHERE referred_by IS NULL AND country = ${lit(k)} AND ${yr("signup_date", y)}`,
    };
  }),
  tpl("ns_untitled_reviews", "null_semantics", "easy", (c) => {
    const r = int(c, 1, 5), y = maybe(c, c.inv.reviewYears);
    if (!y) return null;
    return {
      subject: [`the number of ${r}-star reviews written in ${y} that have no title`, `how many reviews from ${y} with rating ${r} were left without a title`],
      returns: oneNumber("the review count"),
      columns: ["reviews"],
      sql: `SELECT COUNT(*) AS reviews FROM reviews WHERE title IS NULL AND rating = ${r} AND ${yr("created_at", y)}`,
    };
  }),
  tpl("ns_unshipped_status", "null_semantics", "easy", (c) => {
    const s = maybe(c, c.inv.statuses), m = maybe(c, c.inv.months);
    if (!s || !m) return null;
    return {
      subject: [`orders from ${monthName(m)} with status '${s}' that have not been shipped`, `the ${monthName(m)} orders in status '${s}' still lacking a ship date`],
      returns: [`how many there are, as one number`, `a single count`],
      columns: ["unshipped"],
      sql: `SELECT COUNT(*) AS unshipped FROM orders WHERE shipped_at IS NULL AND status = ${lit(s)} AND strftime('%Y-%m', order_date) = '${m}'`,
    };
  }),
  tpl("ns_online_orders_country", "null_semantics", "medium", (c) => {
    const y = maybe(c, c.inv.years), k = maybe(c, c.inv.shipCountries);
    if (!y || !k) return null;
    return {
      subject: [`orders placed in ${y} and shipped to '${k}', split into those handled by a sales rep and those placed online without one`, `for ${y} orders with shipping country '${k}', the count with a sales rep versus without a sales rep`],
      returns: [`two numbers: orders with a rep, then orders without`, `first the count having a sales rep, second the count with none`],
      columns: ["with_rep", "without_rep"],
      sql: `SELECT COUNT(sales_rep_id) AS with_rep, COUNT(*) - COUNT(sales_rep_id) AS without_rep FROM orders WHERE ${yr("order_date", y)} AND shipping_country = ${lit(k)}`,
    };
  }),
  tpl("ns_discount_counts", "null_semantics", "medium", (c) => {
    const s = maybe(c, c.inv.statuses), y = maybe(c, c.inv.years);
    if (!s || !y) return null;
    return {
      subject: [`among '${s}' orders placed in ${y}, the number with a discount, the number without, and the average discount of the discounted ones`, `for ${y} orders whose status is '${s}': discounted count, undiscounted count, and mean discount percentage over only the discounted orders`],
      returns: [`three values in that order, the average rounded to 2 decimals`, `those three numbers, in the order given, average to 2 decimals`],
      columns: ["discounted", "not_discounted", "avg_discount_pct"],
      sql: `SELECT COUNT(discount_pct) AS discounted, COUNT(*) - COUNT(discount_pct) AS not_discounted, ROUND(AVG(discount_pct), 2) AS avg_discount_pct FROM orders WHERE status = ${lit(s)} AND ${yr("order_date", y)}`,
    };
  }),
  tpl("ns_referred_customers_list", "null_semantics", "medium", (c) => {
    const k = maybe(c, c.inv.countries), y = maybe(c, c.inv.signupYears);
    if (!k || !y) return null;
    return {
      subject: [`customers in '${k}' who signed up in ${y} and were referred by someone`, `the ${y} sign-ups from '${k}' that have a referrer`],
      returns: [`customer id and the referrer's customer id, sorted by customer id`, `each customer's id with the id of who referred them, ordered by customer id`],
      columns: ["customer_id", "referred_by"],
      sql: `SELECT customer_id, referred_by FROM customers WHERE referred_by IS NOT NULL AND country = ${lit(k)} AND ${yr("signup_date", y)} ORDER BY customer_id ASC`,
    };
  }),
  tpl("ns_rep_status_breakdown", "null_semantics", "hard", (c) => {
    const y = maybe(c, c.inv.years);
    if (!y) return null;
    return {
      subject: [`for each order status in ${y}: the total number of orders, how many had a sales rep, and how many were online orders with no rep`, `a per-status summary of ${y} orders giving all orders, orders with a rep assigned, and orders without a rep`],
      returns: [`status and the three counts in that order, sorted by status`, `one row per status: status, total, with rep, without rep; alphabetical by status`],
      columns: ["status", "orders", "with_rep", "without_rep"],
      sql: `SELECT status, COUNT(*) AS orders, COUNT(sales_rep_id) AS with_rep, SUM(CASE WHEN sales_rep_id IS NULL THEN 1 ELSE 0 END) AS without_rep FROM orders WHERE ${yr("order_date", y)} GROUP BY status ORDER BY status ASC`,
    };
  }),
  tpl("ns_avg_discount_two_ways", "null_semantics", "hard", (c) => {
    const k = maybe(c, c.inv.shipCountries), y = maybe(c, c.inv.years);
    if (!k || !y) return null;
    return {
      subject: [`for ${y} orders shipped to '${k}', the average discount percentage computed two ways: over discounted orders only, and over all orders with a missing discount taken as 0`, `two averages of discount_pct for '${k}' orders dated ${y} - ignoring orders that have no discount, and counting those as 0`],
      returns: [`both averages rounded to 2 decimals, the discounted-only one first`, `two numbers (2 decimals): the average over discounted orders, then the average over all orders`],
      columns: ["avg_discounted_only", "avg_all_orders"],
      sql: `SELECT ROUND(AVG(discount_pct), 2) AS avg_discounted_only, ROUND(AVG(COALESCE(discount_pct, 0)), 2) AS avg_all_orders FROM orders WHERE shipping_country = ${lit(k)} AND ${yr("order_date", y)}`,
    };
  }),
  tpl("ns_untitled_share_rating", "null_semantics", "hard", (c) => {
    const cat = maybe(c, c.inv.productCategories);
    if (!cat) return null;
    return {
      subject: [`for reviews of products in the '${cat.name}' category, per rating value, the number of reviews and the percentage of them with no title`, `per star rating, how many '${cat.name}' product reviews exist and what percent lack a title`],
      returns: [`rating, review count and untitled percentage rounded to 2 decimals, ordered by rating ascending`, `the rating, its count and the share without a title in percent (2 decimals), sorted by rating`],
      columns: ["rating", "reviews", "untitled_pct"],
      sql: `SELECT r.rating, COUNT(*) AS reviews, ROUND(100.0 * (COUNT(*) - COUNT(r.title)) / COUNT(*), 2) AS untitled_pct FROM reviews r JOIN products p ON p.product_id = r.product_id JOIN categories cat ON cat.category_id = p.category_id WHERE cat.name = ${lit(cat.name)} GROUP BY r.rating ORDER BY r.rating ASC`,
    };
  }),
];
