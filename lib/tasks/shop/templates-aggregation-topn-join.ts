/** Templates: single-table aggregation, top-N, two-table join. */
import { FILED, REVENUE_RULE, REVENUE_STATUSES, full, int, lit, maybe, oneNumber, tpl, type Template } from "./template.js";

const yr = (col: string, y: string) => `strftime('%Y', ${col}) = '${y}'`;

export const AGGREGATION_TOPN_JOIN_TEMPLATES: Template[] = [
  // ---- aggregation
  tpl("agg_count_status_year", "aggregation", "easy", (c) => {
    const s = maybe(c, c.inv.statuses), y = maybe(c, c.inv.years);
    if (!s || !y) return null;
    return {
      subject: [`the number of orders placed in ${y} whose status is '${s}'`, `how many ${y} orders currently have the status '${s}'`],
      returns: oneNumber("the order count"),
      columns: ["order_count"],
      sql: `SELECT COUNT(*) AS order_count FROM orders WHERE status = ${lit(s)} AND ${yr("order_date", y)}`,
    };
  }),
  tpl("agg_customers_country_year", "aggregation", "easy", (c) => {
    const k = maybe(c, c.inv.countries), y = maybe(c, c.inv.signupYears);
    if (!k || !y) return null;
    const opt = int(c, 0, 1);
    const optTxt = opt ? "who opted in to marketing e-mail" : "who did not opt in to marketing e-mail";
    return {
      subject: [`the count of customers with country code '${k}' who signed up during ${y} ${optTxt}`, `how many customers from '${k}' registered in ${y} and are ones ${optTxt}`],
      returns: oneNumber("that customer count"),
      columns: ["customers"],
      sql: `SELECT COUNT(*) AS customers FROM customers WHERE country = ${lit(k)} AND ${yr("signup_date", y)} AND marketing_opt_in = ${opt}`,
    };
  }),
  tpl("agg_salary_extreme_dept", "aggregation", "easy", (c) => {
    const d = maybe(c, c.inv.departments);
    if (!d) return null;
    const hi = int(c, 0, 1) === 1;
    return {
      subject: [`the ${hi ? "highest" : "lowest"} yearly salary paid to anyone in the ${d} department`, `the ${hi ? "top" : "smallest"} salary among ${d} employees`],
      returns: oneNumber("the salary in USD"),
      columns: [hi ? "max_salary" : "min_salary"],
      sql: `SELECT ${hi ? "MAX" : "MIN"}(salary) AS ${hi ? "max_salary" : "min_salary"} FROM employees WHERE department = ${lit(d)}`,
    };
  }),
  tpl("agg_shipping_country_year", "aggregation", "easy", (c) => {
    const k = maybe(c, c.inv.shipCountries), y = maybe(c, c.inv.years);
    if (!k || !y) return null;
    return {
      subject: [`the total shipping cost charged on orders delivered to '${k}' that were placed in ${y}, all statuses included`, `the sum of shipping fees over every ${y} order with shipping country '${k}' (any status)`],
      returns: oneNumber("the total in USD", true),
      columns: ["shipping_total"],
      sql: `SELECT ROUND(SUM(shipping_cost), 2) AS shipping_total FROM orders WHERE shipping_country = ${lit(k)} AND ${yr("order_date", y)}`,
    };
  }),
  tpl("agg_avg_price_stock", "aggregation", "easy", (c) => {
    const n = int(c, 1, 6) * 10, disc = int(c, 0, 1);
    return {
      subject: [`the average list price of ${disc ? "discontinued" : "still-sold (not discontinued)"} products that have more than ${n} units in stock`, `the mean current price over products with stock above ${n} units that are ${disc ? "discontinued" : "not discontinued"}`],
      returns: oneNumber("the average price", true),
      columns: ["avg_price"],
      sql: `SELECT ROUND(AVG(price), 2) AS avg_price FROM products WHERE stock > ${n} AND discontinued = ${disc}`,
    };
  }),
  tpl("agg_distinct_buyers_month", "aggregation", "medium", (c) => {
    const m = maybe(c, c.inv.months), s = maybe(c, c.inv.statuses);
    if (!m || !s) return null;
    return {
      subject: [`the number of distinct customers who placed at least one order in month ${m} that now has status '${s}'`, `how many different customers have an order dated in ${m} with status '${s}'`],
      returns: oneNumber("the number of distinct customers"),
      columns: ["distinct_customers"],
      sql: `SELECT COUNT(DISTINCT customer_id) AS distinct_customers FROM orders WHERE strftime('%Y-%m', order_date) = '${m}' AND status = ${lit(s)}`,
    };
  }),
  tpl("agg_payments_method_status_year", "aggregation", "medium", (c) => {
    const m = maybe(c, c.inv.methods), s = maybe(c, c.inv.paymentStatuses), y = maybe(c, c.inv.years);
    if (!m || !s || !y) return null;
    return {
      subject: [`the total amount of '${s}' payments made by '${m}' with a paid_at time in ${y}`, `the summed amount of payments using method '${m}' whose status is '${s}', paid during ${y}`],
      returns: oneNumber("the amount in USD", true),
      columns: ["total_amount"],
      sql: `SELECT ROUND(SUM(amount), 2) AS total_amount FROM payments WHERE method = ${lit(m)} AND status = ${lit(s)} AND ${yr("paid_at", y)}`,
    };
  }),
  tpl("agg_line_quantity", "aggregation", "medium", (c) => {
    const p = int(c, 2, 30) * 10;
    const big = int(c, 0, 1) === 1;
    return {
      subject: [`the average quantity per order line, over order lines whose charged unit price is ${big ? "above" : "at most"} ${p} USD`, `the mean number of units on order_items rows charged ${big ? "more than" : "no more than"} ${p} USD per unit`],
      returns: oneNumber("the average quantity", true),
      columns: ["avg_quantity"],
      sql: `SELECT ROUND(AVG(quantity), 2) AS avg_quantity FROM order_items WHERE unit_price ${big ? ">" : "<="} ${p}`,
    };
  }),
  tpl("agg_avg_discount_null_as_zero", "aggregation", "hard", (c) => {
    const y = maybe(c, c.inv.years), k = maybe(c, c.inv.shipCountries);
    if (!y || !k) return null;
    return {
      subject: [`the average discount percentage over all orders placed in ${y} and shipped to '${k}', where an order with no discount counts as 0%`, `the mean discount_pct of ${y} orders going to '${k}', treating orders without a discount as a 0 percent discount`],
      returns: oneNumber("the average percentage", true),
      columns: ["avg_discount_pct"],
      sql: `SELECT ROUND(AVG(COALESCE(discount_pct, 0)), 2) AS avg_discount_pct FROM orders WHERE ${yr("order_date", y)} AND shipping_country = ${lit(k)}`,
    };
  }),
  tpl("agg_share_online", "aggregation", "hard", (c) => {
    const y = maybe(c, c.inv.years), s = maybe(c, c.inv.statuses);
    if (!y || !s) return null;
    return {
      subject: [`the percentage of ${y} orders with status '${s}' that were placed online without a sales rep`, `what share (in percent) of the '${s}' orders from ${y} have no sales rep assigned`],
      returns: oneNumber("the percentage between 0 and 100", true),
      columns: ["online_pct"],
      sql: `SELECT ROUND(100.0 * SUM(CASE WHEN sales_rep_id IS NULL THEN 1 ELSE 0 END) / COUNT(*), 2) AS online_pct FROM orders WHERE ${yr("order_date", y)} AND status = ${lit(s)}`,
    };
  }),
  tpl("agg_price_spread_year", "aggregation", "hard", (c) => {
    const y = maybe(c, [...new Set(c.inv.products.map((p) => p.created_year))]);
    if (!y) return null;
    const disc = int(c, 0, 1);
    return {
      subject: [`the gap between the highest and the lowest list price among products added to the catalogue in ${y} that are ${disc ? "discontinued" : "still sold"}`, `the price range (max minus min) of ${disc ? "discontinued" : "active, not discontinued"} products created in ${y}`],
      returns: oneNumber("the difference in USD", true),
      columns: ["price_range"],
      sql: `SELECT ROUND(MAX(price) - MIN(price), 2) AS price_range FROM products WHERE ${yr("created_at", y)} AND discontinued = ${disc}`,
    };
  }),
  // ---- top-N
  tpl("top_expensive_products", "top_n", "easy", (c) => {
    const n = int(c, 3, 10), disc = int(c, 0, 1);
    return {
      subject: [`the ${n} most expensive ${disc ? "discontinued" : "not discontinued"} products by list price`, `the top ${n} priciest products among those ${disc ? "discontinued" : "still on sale"}`],
      returns: [`product name and price, highest price first, ties broken by name A to Z`, `the name and list price of each, ordered by price descending then name ascending`],
      columns: ["name", "price"],
      sql: `SELECT name, price FROM products WHERE discontinued = ${disc} ORDER BY price DESC, name ASC LIMIT ${n}`,
    };
  }),
  tpl("top_recent_signups", "top_n", "easy", (c) => {
    const k = maybe(c, c.inv.countries);
    if (!k) return null;
    const n = int(c, 3, 8);
    return {
      subject: [`the ${n} customers from '${k}' who signed up most recently`, `the latest ${n} sign-ups among customers with country '${k}'`],
      returns: [`first name, last name and signup date, newest first, ties broken by customer id ascending`, `their first and last names plus signup date, sorted by signup date descending then customer id`],
      columns: ["first_name", "last_name", "signup_date"],
      sql: `SELECT first_name, last_name, signup_date FROM customers WHERE country = ${lit(k)} ORDER BY signup_date DESC, customer_id ASC LIMIT ${n}`,
    };
  }),
  tpl("top_largest_payments", "top_n", "easy", (c) => {
    const m = maybe(c, c.inv.methods), y = maybe(c, c.inv.years);
    if (!m || !y) return null;
    const n = int(c, 3, 10);
    return {
      subject: [`the ${n} largest captured payments made with '${m}' in ${y}`, `the ${n} biggest '${m}' payments with status 'captured' paid in ${y}`],
      returns: [`payment id and amount, largest amount first, ties by payment id ascending`, `each payment's id and amount ordered by amount descending, then id`],
      columns: ["payment_id", "amount"],
      sql: `SELECT payment_id, amount FROM payments WHERE method = ${lit(m)} AND status = 'captured' AND ${yr("paid_at", y)} ORDER BY amount DESC, payment_id ASC LIMIT ${n}`,
    };
  }),
  tpl("top_low_stock", "top_n", "easy", (c) => {
    const n = int(c, 3, 10);
    return {
      subject: [`the ${n} products with the fewest units in stock, ignoring discontinued ones`, `the ${n} lowest-stock items among products that are not discontinued`],
      returns: [`sku, name and stock, smallest stock first, ties by sku`, `the sku, product name and units on hand sorted by stock ascending and then sku`],
      columns: ["sku", "name", "stock"],
      sql: `SELECT sku, name, stock FROM products WHERE discontinued = 0 ORDER BY stock ASC, sku ASC LIMIT ${n}`,
    };
  }),
  tpl("top_units_sold_year", "top_n", "medium", (c) => {
    const y = maybe(c, c.inv.years);
    if (!y) return null;
    const n = int(c, 3, 8);
    return {
      subject: [`the ${n} products that sold the most units on orders placed in ${y}, counting every order regardless of status`, `the top ${n} products by total quantity ordered in ${y} (all order statuses)`],
      returns: [`product name and total units, most units first, ties broken by product name`, `the name and summed quantity, sorted by quantity descending then name ascending`],
      columns: ["name", "units"],
      sql: `SELECT p.name, SUM(oi.quantity) AS units FROM order_items oi JOIN orders o ON o.order_id = oi.order_id JOIN products p ON p.product_id = oi.product_id WHERE ${yr("o.order_date", y)} GROUP BY p.product_id, p.name ORDER BY units DESC, p.name ASC LIMIT ${n}`,
    };
  }),
  tpl("top_customers_by_orders", "top_n", "medium", (c) => {
    const k = maybe(c, c.inv.countries);
    if (!k) return null;
    const n = int(c, 3, 6);
    return {
      subject: [`the ${n} customers living in '${k}' who have placed the most orders (any status)`, `the top ${n} '${k}' customers ranked by their number of orders of any status`],
      returns: [`customer id, last name and order count, most orders first, ties by customer id ascending`, `id, last name and number of orders, ordered by the count descending then id`],
      columns: ["customer_id", "last_name", "orders"],
      sql: `SELECT c.customer_id, c.last_name, COUNT(*) AS orders FROM customers c JOIN orders o ON o.customer_id = c.customer_id WHERE c.country = ${lit(k)} GROUP BY c.customer_id, c.last_name ORDER BY orders DESC, c.customer_id ASC LIMIT ${n}`,
    };
  }),
  tpl("top_cities", "top_n", "medium", (c) => {
    const k = maybe(c, c.inv.countries);
    if (!k) return null;
    const n = int(c, 2, 5);
    return {
      subject: [`the ${n} cities in '${k}' with the most customers`, `the ${n} '${k}' cities that are home to the largest number of customers`],
      returns: [`city and customer count, biggest count first, ties by city name A-Z`, `the city name and how many customers live there, sorted by that number descending then city`],
      columns: ["city", "customers"],
      sql: `SELECT city, COUNT(*) AS customers FROM customers WHERE country = ${lit(k)} GROUP BY city ORDER BY customers DESC, city ASC LIMIT ${n}`,
    };
  }),
  tpl("top_revenue_products", "top_n", "hard", (c) => {
    const y = maybe(c, c.inv.years);
    if (!y) return null;
    const n = int(c, 3, 8);
    return {
      subject: [`the ${n} products with the highest item revenue (quantity times charged unit price, before discount and shipping) in ${y}, ${c.rng.next() < 0.5 ? REVENUE_RULE[0] : REVENUE_RULE[1]}`, `the top ${n} products of ${y} by sum of quantity x unit_price on their order lines, ${REVENUE_RULE[2]}`],
      returns: [`product name and revenue rounded to 2 decimals, highest first, ties by name`, `name plus revenue (2 decimals), ordered by revenue descending then product name`],
      columns: ["name", "revenue"],
      sql: `SELECT p.name, ROUND(SUM(oi.quantity * oi.unit_price), 2) AS revenue FROM order_items oi JOIN orders o ON o.order_id = oi.order_id JOIN products p ON p.product_id = oi.product_id WHERE ${yr("o.order_date", y)} AND o.status IN ${REVENUE_STATUSES} GROUP BY p.product_id, p.name ORDER BY SUM(oi.quantity * oi.unit_price) DESC, p.name ASC LIMIT ${n}`,
    };
  }),
  tpl("top_customers_captured", "top_n", "hard", (c) => {
    const k = maybe(c, c.inv.countries);
    if (!k) return null;
    const n = int(c, 3, 6);
    return {
      subject: [`the ${n} customers from '${k}' with the largest total of captured payments (failed and refunded payments excluded)`, `the ${n} biggest spenders in '${k}', measured by the sum of their payments whose status is 'captured'`],
      returns: [`customer id and total captured amount rounded to 2 decimals, largest first, ties by customer id`, `id and captured total (2 decimals), sorted by total descending then customer id ascending`],
      columns: ["customer_id", "captured_total"],
      sql: `SELECT c.customer_id, ROUND(SUM(p.amount), 2) AS captured_total FROM customers c JOIN orders o ON o.customer_id = c.customer_id JOIN payments p ON p.order_id = o.order_id WHERE c.country = ${lit(k)} AND p.status = 'captured' GROUP BY c.customer_id ORDER BY SUM(p.amount) DESC, c.customer_id ASC LIMIT ${n}`,
    };
  }),
  tpl("top_rated_products", "top_n", "hard", (c) => {
    const k = int(c, 2, 4), n = int(c, 3, 6);
    return {
      subject: [`the ${n} products with the best average review rating among products that have at least ${k} reviews`, `the top ${n} products by mean rating, considering only products reviewed ${k} or more times`],
      returns: [`product name and average rating rounded to 2 decimals, best first, ties by product name`, `name and average rating (2 decimals), ordered by rating descending then name ascending`],
      columns: ["name", "avg_rating"],
      sql: `SELECT p.name, ROUND(AVG(r.rating), 2) AS avg_rating FROM products p JOIN reviews r ON r.product_id = p.product_id GROUP BY p.product_id, p.name HAVING COUNT(*) >= ${k} ORDER BY AVG(r.rating) DESC, p.name ASC LIMIT ${n}`,
    };
  }),
  // ---- two-table join
  tpl("j2_products_in_category", "join_two", "easy", (c) => {
    const cat = maybe(c, c.inv.productCategories);
    if (!cat) return null;
    const p = int(c, 0, 10) * 10;
    return {
      subject: [`the products in the '${cat.name}' category whose list price is above ${p} USD`, `which '${cat.name}' products cost more than ${p} USD`],
      returns: [`their names, sorted alphabetically`, `product names only, in A to Z order`],
      columns: ["name"],
      sql: `SELECT p.name FROM products p JOIN categories c ON c.category_id = p.category_id WHERE c.name = ${lit(cat.name)} AND p.price > ${p} ORDER BY p.name ASC`,
    };
  }),
  tpl("j2_orders_of_customer", "join_two", "easy", (c) => {
    const b = maybe(c, c.inv.buyers);
    if (!b) return null;
    return {
      subject: [`all orders placed by the customer named ${full(b)}`, `every order belonging to customer ${full(b)}`],
      returns: [`order id, order date and status, oldest order first, ties by order id`, `each order's id, date and status in date order (then id)`],
      columns: ["order_id", "order_date", "status"],
      sql: `SELECT o.order_id, o.order_date, o.status FROM orders o JOIN customers c ON c.customer_id = o.customer_id WHERE c.first_name = ${lit(b.first)} AND c.last_name = ${lit(b.last)} ORDER BY o.order_date ASC, o.order_id ASC`,
    };
  }),
  tpl("j2_reviews_of_product", "join_two", "easy", (c) => {
    const p = maybe(c, c.inv.reviewedProducts);
    if (!p) return null;
    return {
      subject: [`the reviews written about the product '${p.name}'`, `all ratings customers gave to '${p.name}'`],
      returns: [`review id, rating and review date, newest first, ties by review id`, `the id, rating and created date of each review, ordered by date descending then id`],
      columns: ["review_id", "rating", "created_at"],
      sql: `SELECT r.review_id, r.rating, r.created_at FROM reviews r JOIN products p ON p.product_id = r.product_id WHERE p.name = ${lit(p.name)} ORDER BY r.created_at DESC, r.review_id ASC`,
    };
  }),
  tpl("j2_status_counts_country", "join_two", "medium", (c) => {
    const k = maybe(c, c.inv.countries);
    if (!k) return null;
    return {
      subject: [`for customers whose home country is '${k}', how many of their orders are in each status`, `the breakdown by order status of orders placed by customers living in '${k}'`],
      returns: [`status and number of orders, sorted by status alphabetically`, `one row per status with its order count, ordered by status name`],
      columns: ["status", "orders"],
      sql: `SELECT o.status, COUNT(*) AS orders FROM orders o JOIN customers c ON c.customer_id = o.customer_id WHERE c.country = ${lit(k)} GROUP BY o.status ORDER BY o.status ASC`,
    };
  }),
  tpl("j2_category_active_counts", "join_two", "medium", (c) => {
    const n = int(c, 0, 4) * 25;
    return {
      subject: [`for every category, the number of products filed in it that are not discontinued and are priced over ${n} USD (${FILED})`, `per product category, how many still-sold products with a list price above ${n} USD are filed in it (${FILED})`],
      returns: [`category name and count, categories with no such product left out, sorted by category name`, `the category name with that number (only categories where it is at least 1), in alphabetical order`],
      columns: ["category", "products"],
      sql: `SELECT c.name AS category, COUNT(*) AS products FROM products p JOIN categories c ON c.category_id = p.category_id WHERE p.discontinued = 0 AND p.price > ${n} GROUP BY c.category_id, c.name ORDER BY c.name ASC`,
    };
  }),
  tpl("j2_product_avg_rating", "join_two", "medium", (c) => {
    const p = maybe(c, c.inv.reviewedProducts);
    if (!p) return null;
    return {
      subject: [`the average rating and number of reviews of the product called '${p.name}'`, `how '${p.name}' is rated: its mean review rating and its review count`],
      returns: [`two numbers: average rating rounded to 2 decimals, then the number of reviews`, `the average rating (2 decimals) followed by the count of reviews`],
      columns: ["avg_rating", "reviews"],
      sql: `SELECT ROUND(AVG(r.rating), 2) AS avg_rating, COUNT(*) AS reviews FROM reviews r JOIN products p ON p.product_id = r.product_id WHERE p.name = ${lit(p.name)}`,
    };
  }),
  tpl("j2_failed_payments_country", "join_two", "hard", (c) => {
    const k = maybe(c, c.inv.shipCountries), y = maybe(c, c.inv.years);
    if (!k || !y) return null;
    return {
      subject: [`the total value of failed payment attempts on orders shipped to '${k}' whose order date is in ${y}`, `how much money failed to be collected (payments with status 'failed') for ${y} orders with shipping country '${k}'`],
      returns: [`the summed amount and the number of failed attempts, amount rounded to 2 decimals`, `two values: total failed amount (2 decimals) and count of those payments`],
      columns: ["failed_amount", "failed_attempts"],
      sql: `SELECT ROUND(SUM(p.amount), 2) AS failed_amount, COUNT(*) AS failed_attempts FROM payments p JOIN orders o ON o.order_id = p.order_id WHERE p.status = 'failed' AND o.shipping_country = ${lit(k)} AND ${yr("o.order_date", y)}`,
    };
  }),
  tpl("j2_rep_orders_with_zero", "join_two", "hard", (c) => {
    const y = maybe(c, c.inv.years), s = maybe(c, c.inv.statuses);
    if (!y || !s) return null;
    return {
      subject: [`for every employee in the Sales department, how many orders with status '${s}' placed in ${y} they handled as sales rep, including reps with none (0)`, `per Sales-department employee, the number of ${y} '${s}' orders on which they were the sales rep, showing 0 for those without any`],
      returns: [`employee id and order count, sorted by employee id`, `the employee's id with the count, ordered by employee id ascending`],
      columns: ["employee_id", "orders"],
      sql: `SELECT e.employee_id, COUNT(o.order_id) AS orders FROM employees e LEFT JOIN orders o ON o.sales_rep_id = e.employee_id AND o.status = ${lit(s)} AND ${yr("o.order_date", y)} WHERE e.department = 'Sales' GROUP BY e.employee_id ORDER BY e.employee_id ASC`,
    };
  }),
  tpl("j2_customers_many_orders", "join_two", "hard", (c) => {
    const k = maybe(c, c.inv.countries), s = maybe(c, ["delivered", "shipped", "paid"]);
    if (!k || !s) return null;
    const n = int(c, 1, 3);
    return {
      subject: [`customers from '${k}' who have more than ${n} orders in status '${s}'`, `which '${k}' customers have over ${n} orders whose status is '${s}'`],
      returns: [`first name, last name and that order count, most orders first, ties by last name then first name`, `their names (first, last) and number of such orders, ordered by the count descending, then last and first name`],
      columns: ["first_name", "last_name", "orders"],
      sql: `SELECT c.first_name, c.last_name, COUNT(*) AS orders FROM customers c JOIN orders o ON o.customer_id = c.customer_id WHERE c.country = ${lit(k)} AND o.status = ${lit(s)} GROUP BY c.customer_id, c.first_name, c.last_name HAVING COUNT(*) > ${n} ORDER BY orders DESC, c.last_name ASC, c.first_name ASC`,
    };
  }),
];
