/**
 * Generates the rows of the shop database from a seed. Every wrinkle that makes questions hard is made
 * on purpose here: NULLs with documented meanings, failed-then-captured and split payments, refunds,
 * discounts, customers who never order, products never ordered or never reviewed, discontinued products,
 * a four-level manager hierarchy, referrals, same-named cities in different countries.
 */
import { CATEGORIES, COUNTRIES, EMAIL_DOMAINS, EMPLOYEES, FIRST_NAMES, LAST_NAMES, PRODUCTS, REVIEW_TITLES, SKU_PREFIX } from "./catalog.js";
import { SeededRandom } from "../../core/random.js";

export type Row = (string | number | null)[];

export interface ShopRows {
  categories: Row[];
  products: Row[];
  customers: Row[];
  employees: Row[];
  orders: Row[];
  order_items: Row[];
  payments: Row[];
  reviews: Row[];
}

const DAY_MS = 86_400_000;
export const FIRST_ORDER_DAY = "2023-01-01";
export const LAST_ORDER_DAY = "2025-06-30";
const ORDER_COUNT = 300;
const CUSTOMER_COUNT = 80;
/** Discontinued products stop appearing in orders after this day. */
const DISCONTINUED_AFTER = "2024-10-01";

function dayNumber(iso: string): number {
  return Math.floor(Date.UTC(Number(iso.slice(0, 4)), Number(iso.slice(5, 7)) - 1, Number(iso.slice(8, 10))) / DAY_MS);
}

function isoDay(day: number): string {
  return new Date(day * DAY_MS).toISOString().slice(0, 10);
}

/** Rounds like SQLite's round(x, 2) (decimal rounding of the exact binary value), so SQL totals match. */
function round2(x: number): number {
  return Number(x.toFixed(2));
}

function clock(rng: SeededRandom, fromHour = 7, toHour = 23): string {
  const h = rng.between(fromHour, toHour - 1);
  const pad = (n: number) => String(n).padStart(2, "0");
  return `${pad(h)}:${pad(rng.between(0, 59))}:${pad(rng.between(0, 59))}`;
}

interface Product {
  id: number;
  price: number;
  createdDay: number;
  discontinued: boolean;
}

function makeCategories(): { rows: Row[]; idOf: Map<string, number>; topOf: (name: string) => string } {
  const idOf = new Map<string, number>();
  const parentOf = new Map<string, string | undefined>();
  const rows: Row[] = [];
  CATEGORIES.forEach((c, i) => {
    idOf.set(c.name, i + 1);
    parentOf.set(c.name, c.parent);
    rows.push([i + 1, c.name, c.parent ? (idOf.get(c.parent) as number) : null]);
  });
  const topOf = (name: string): string => {
    let n = name;
    while (parentOf.get(n)) n = parentOf.get(n) as string;
    return n;
  };
  return { rows, idOf, topOf };
}

function makeProducts(rng: SeededRandom, idOf: Map<string, number>, topOf: (n: string) => string): { rows: Row[]; products: Product[] } {
  const counters = new Map<string, number>();
  const discontinued = new Set(rng.shuffle(PRODUCTS.map((_, i) => i)).slice(0, 6));
  const rows: Row[] = [];
  const products: Product[] = [];
  PRODUCTS.forEach((p, i) => {
    const prefix = SKU_PREFIX[topOf(p.category)];
    const n = (counters.get(prefix) ?? 0) + 1;
    counters.set(prefix, n);
    const early = discontinued.has(i) || rng.chance(0.7);
    const created = early ? rng.between(dayNumber("2022-03-01"), dayNumber("2022-12-31")) : rng.between(dayNumber("2023-02-01"), dayNumber("2025-03-31"));
    const cost = round2(p.price * (0.38 + rng.next() * 0.3));
    const isDisc = discontinued.has(i);
    // Discontinued stock is mostly sold out; one keeps a few units left over.
    const stock = isDisc ? (rng.chance(0.2) ? rng.between(1, 9) : 0) : rng.chance(0.08) ? 0 : rng.between(3, 250);
    rows.push([i + 1, `${prefix}-${String(n).padStart(4, "0")}`, p.name, idOf.get(p.category) as number, p.price, cost, stock, isDisc ? 1 : 0, isoDay(created)]);
    products.push({ id: i + 1, price: p.price, createdDay: created, discontinued: isDisc });
  });
  return { rows, products };
}

interface Customer {
  id: number;
  country: string;
  signupDay: number;
  orders: boolean;
  weight: number;
}

function makeCustomers(rng: SeededRandom): { rows: Row[]; customers: Customer[] } {
  const days: number[] = [];
  // Most customers sign up before or during the first two years; a few arrive late and have no time to order.
  for (let i = 0; i < CUSTOMER_COUNT; i++) {
    days.push(rng.chance(0.9) ? rng.between(dayNumber("2022-01-10"), dayNumber("2024-09-30")) : rng.between(dayNumber("2024-10-01"), dayNumber("2025-06-25")));
  }
  days.sort((a, b) => a - b);
  const usedNames = new Set<string>();
  const usedEmails = new Set<string>();
  const rows: Row[] = [];
  const customers: Customer[] = [];
  const neverOrder = new Set(rng.shuffle(Array.from({ length: CUSTOMER_COUNT - 10 }, (_, i) => i + 1)).slice(0, 8));
  for (let i = 0; i < CUSTOMER_COUNT; i++) {
    const id = i + 1;
    let first: string;
    let last: string;
    do {
      first = rng.pick(FIRST_NAMES);
      last = rng.pick(LAST_NAMES);
    } while (usedNames.has(`${first} ${last}`));
    usedNames.add(`${first} ${last}`);
    let email = `${first}.${last}@${rng.pick(EMAIL_DOMAINS)}`.toLowerCase();
    for (let k = 2; usedEmails.has(email); k++) email = email.replace("@", `${k}@`);
    usedEmails.add(email);
    const country = rng.weighted(COUNTRIES, COUNTRIES.map((c) => c.weight));
    const referredBy = id > 5 && rng.chance(0.22) ? rng.between(1, id - 1) : null;
    rows.push([id, first, last, email, country.code, rng.pick(country.cities), isoDay(days[i]), rng.chance(0.45) ? 1 : 0, referredBy]);
    // A few customers buy a lot: weights from a heavy-tailed draw.
    customers.push({ id, country: country.code, signupDay: days[i], orders: !neverOrder.has(id), weight: 0.6 + Math.pow(rng.next(), 3) * 6 });
  }
  return { rows, customers };
}

function makeEmployees(): Row[] {
  return EMPLOYEES.map((e, i) => [i + 1, e.first, e.last, e.department, e.hire, e.salary, e.manager === undefined ? null : e.manager + 1]);
}

function pickStatus(rng: SeededRandom, daysBeforeEnd: number): string {
  if (daysBeforeEnd <= 20) return rng.weighted(["pending", "paid", "shipped", "delivered", "cancelled"], [22, 25, 30, 13, 10]);
  return rng.weighted(["delivered", "cancelled", "refunded", "shipped", "paid", "pending"], [72, 10, 8, 5, 3, 2]);
}

/** Generates every table's rows for `seed`. */
export function generateShop(seed: number): ShopRows {
  const rng = new SeededRandom(seed);
  const cats = makeCategories();
  const { rows: productRows, products } = makeProducts(rng, cats.idOf, cats.topOf);
  const { rows: customerRows, customers } = makeCustomers(rng);
  const employeeRows = makeEmployees();
  const first = dayNumber(FIRST_ORDER_DAY);
  const last = dayNumber(LAST_ORDER_DAY);
  const neverOrdered = new Set(rng.shuffle(products.filter((p) => !p.discontinued)).slice(0, 2).map((p) => p.id));
  const reps = EMPLOYEES.map((e, i) => ({ id: i + 1, dept: e.department, hire: dayNumber(e.hire) })).filter((e) => e.dept === "Sales");

  const orderDays: number[] = [];
  // Business grows: density rises over the period.
  for (let i = 0; i < ORDER_COUNT; i++) {
    const u = rng.chance(0.5) ? rng.next() : Math.sqrt(rng.next());
    orderDays.push(first + Math.floor(u * (last - first + 1)));
  }
  orderDays.sort((a, b) => a - b);

  const orders: Row[] = [];
  const items: Row[] = [];
  const payments: Row[] = [];
  const bought: { customer: number; product: number; day: number; status: string }[] = [];
  const ordered = new Set<number>();
  let itemId = 1;
  let paymentId = 1;
  orderDays.forEach((day, index) => {
    const orderId = index + 1;
    let eligible = customers.filter((c) => c.orders && c.signupDay <= day);
    if (eligible.length === 0) eligible = customers.filter((c) => c.orders).slice(0, 1);
    // Customers who have not ordered yet are favoured, so "never ordered" stays a deliberate minority.
    const customer = rng.weighted(eligible, eligible.map((c) => c.weight * (ordered.has(c.id) ? 1 : 6)));
    ordered.add(customer.id);
    const status = pickStatus(rng, last - day);
    const repChoices = reps.filter((r) => r.hire <= day);
    const rep = rng.chance(0.35) && repChoices.length > 0 ? rng.pick(repChoices).id : null;
    const shipCountry = rng.chance(0.08) ? rng.pick(COUNTRIES.filter((c) => c.code !== customer.country)).code : customer.country;
    const discount = rng.chance(0.3) ? rng.weighted([5, 10, 15, 20, 25], [20, 35, 20, 15, 10]) : null;

    const available = products.filter((p) => p.createdDay <= day && !neverOrdered.has(p.id) && !(p.discontinued && day >= dayNumber(DISCONTINUED_AFTER)));
    const count = Math.min(available.length, rng.weighted([1, 2, 3, 4, 5], [35, 30, 18, 11, 6]));
    let subtotal = 0;
    for (const p of rng.shuffle(available).slice(0, count)) {
      const qty = rng.weighted([1, 2, 3, 4], [60, 25, 10, 5]);
      const unit = rng.chance(0.2) ? round2(p.price * (0.85 + rng.next() * 0.25)) : p.price;
      items.push([itemId++, orderId, p.id, qty, unit]);
      subtotal += qty * unit;
      bought.push({ customer: customer.id, product: p.id, day, status });
    }
    const discounted = subtotal * (1 - (discount ?? 0) / 100);
    const domestic = shipCountry === "US";
    const shippingCost = (discounted >= 150 && rng.chance(0.8)) || rng.chance(0.05) ? 0 : domestic ? rng.pick([4.99, 7.99]) : rng.pick([12.5, 19.99]);
    const total = round2(discounted + shippingCost);

    const ships = status === "shipped" || status === "delivered" || status === "refunded";
    const shipDelay = rng.chance(0.1) ? rng.between(8, 14) : rng.between(1, 5);
    const shippedAt = ships ? isoDay(Math.min(last, day + shipDelay)) : null;
    orders.push([orderId, customer.id, rep, isoDay(day), status, shippedAt, shipCountry, shippingCost, discount]);

    const pay = (amount: number, method: string, state: string, payDay: number, time: string) =>
      payments.push([paymentId++, orderId, round2(amount), method, state, `${isoDay(payDay)} ${time}`]);
    const method = rng.weighted(["card", "paypal", "bank_transfer", "gift_card"], [55, 25, 12, 8]);
    // Bank transfers arrive a few days after the order.
    const payDay = method === "bank_transfer" ? Math.min(last, day + rng.between(1, 3)) : day;
    if (status === "pending" || status === "cancelled") {
      if (rng.chance(status === "cancelled" ? 0.35 : 0.25)) pay(total, "card", "failed", day, clock(rng));
      return;
    }
    if (rng.chance(0.15)) pay(total, rng.pick(["card", "paypal"]), "failed", day, clock(rng, 7, 12));
    const time = clock(rng, 12, 23);
    if (status === "refunded") {
      pay(total, method, "refunded", payDay, time);
    } else if (method !== "gift_card" && total > 60 && rng.chance(0.05)) {
      const gift = rng.pick([25, 50]);
      pay(gift, "gift_card", "captured", payDay, time);
      pay(total - gift, method, "captured", payDay, time);
    } else {
      pay(total, method, "captured", payDay, time);
    }
  });

  const reviews = makeReviews(rng, bought, products, last);
  return {
    categories: cats.rows,
    products: productRows,
    customers: customerRows,
    employees: employeeRows,
    orders,
    order_items: items,
    payments,
    reviews,
  };
}

function makeReviews(rng: SeededRandom, bought: { customer: number; product: number; day: number; status: string }[], products: Product[], last: number): Row[] {
  const neverReviewed = new Set(rng.shuffle(products.map((p) => p.id)).slice(0, 7));
  const seen = new Set<string>();
  const drafts: { product: number; customer: number; rating: number; title: string | null; day: number }[] = [];
  for (const b of bought) {
    if (b.status !== "delivered" && b.status !== "refunded") continue;
    const key = `${b.customer}:${b.product}`;
    if (seen.has(key) || neverReviewed.has(b.product)) continue;
    seen.add(key);
    if (!rng.chance(0.38)) continue;
    const rating = b.status === "refunded" ? rng.weighted([1, 2, 3, 4, 5], [45, 30, 15, 7, 3]) : rng.weighted([1, 2, 3, 4, 5], [6, 7, 13, 32, 42]);
    const day = b.day + rng.between(5, 60);
    if (day > last) continue;
    drafts.push({ product: b.product, customer: b.customer, rating, title: rng.chance(0.3) ? null : rng.pick(REVIEW_TITLES[rating]), day });
  }
  drafts.sort((a, b) => a.day - b.day || a.customer - b.customer || a.product - b.product);
  return drafts.map((d, i) => [i + 1, d.product, d.customer, d.rating, d.title, isoDay(d.day)]);
}
