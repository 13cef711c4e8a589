-- The shop database: an online store. Column comments are read by the schema introspector and shown to
-- models in prompts, so they say what a value means, especially what NULL means.

CREATE TABLE categories (
  category_id INTEGER PRIMARY KEY,
  name TEXT NOT NULL UNIQUE,            -- display name, e.g. 'Coffee Makers'
  parent_id INTEGER REFERENCES categories(category_id) -- NULL for a top-level category
);

CREATE TABLE products (
  product_id INTEGER PRIMARY KEY,
  sku TEXT NOT NULL UNIQUE,             -- stock keeping unit, e.g. 'KIT-0012'
  name TEXT NOT NULL,
  category_id INTEGER NOT NULL REFERENCES categories(category_id),
  price REAL NOT NULL,                  -- current list price in USD
  cost REAL NOT NULL,                   -- unit cost to the shop in USD
  stock INTEGER NOT NULL,               -- units on hand now
  discontinued INTEGER NOT NULL DEFAULT 0, -- 1 if no longer sold, else 0
  created_at TEXT NOT NULL              -- date added to the catalogue, 'YYYY-MM-DD'
);

CREATE TABLE customers (
  customer_id INTEGER PRIMARY KEY,
  first_name TEXT NOT NULL,
  last_name TEXT NOT NULL,
  email TEXT NOT NULL UNIQUE,
  country TEXT NOT NULL,                -- ISO 3166-1 alpha-2 code, e.g. 'DE'
  city TEXT NOT NULL,
  signup_date TEXT NOT NULL,            -- 'YYYY-MM-DD'
  marketing_opt_in INTEGER NOT NULL,    -- 1 if the customer agreed to marketing e-mail, else 0
  referred_by INTEGER REFERENCES customers(customer_id) -- the referring customer; NULL if not referred
);

CREATE TABLE employees (
  employee_id INTEGER PRIMARY KEY,
  first_name TEXT NOT NULL,
  last_name TEXT NOT NULL,
  department TEXT NOT NULL,             -- 'Sales', 'Support', 'Warehouse', 'Marketing' or 'Management'
  hire_date TEXT NOT NULL,              -- 'YYYY-MM-DD'
  salary REAL NOT NULL,                 -- yearly, USD
  manager_id INTEGER REFERENCES employees(employee_id) -- direct manager; NULL for the head of the company
);

CREATE TABLE orders (
  order_id INTEGER PRIMARY KEY,
  customer_id INTEGER NOT NULL REFERENCES customers(customer_id),
  sales_rep_id INTEGER REFERENCES employees(employee_id), -- NULL when the order was placed online without a rep
  order_date TEXT NOT NULL,             -- 'YYYY-MM-DD'
  status TEXT NOT NULL,                 -- 'pending', 'paid', 'shipped', 'delivered', 'cancelled' or 'refunded'
  shipped_at TEXT,                      -- 'YYYY-MM-DD'; NULL if the order has not shipped (pending, paid, cancelled)
  shipping_country TEXT NOT NULL,       -- ISO 3166-1 alpha-2 code of the delivery address
  shipping_cost REAL NOT NULL,          -- USD charged for shipping
  discount_pct REAL                     -- percent off the items subtotal, e.g. 10 for 10%; NULL means no discount
);

CREATE TABLE order_items (
  order_item_id INTEGER PRIMARY KEY,
  order_id INTEGER NOT NULL REFERENCES orders(order_id),
  product_id INTEGER NOT NULL REFERENCES products(product_id),
  quantity INTEGER NOT NULL,
  unit_price REAL NOT NULL              -- USD per unit as charged on that order (may differ from products.price)
);

CREATE TABLE payments (
  payment_id INTEGER PRIMARY KEY,
  order_id INTEGER NOT NULL REFERENCES orders(order_id),
  amount REAL NOT NULL,                 -- USD
  method TEXT NOT NULL,                 -- 'card', 'paypal', 'bank_transfer' or 'gift_card'
  status TEXT NOT NULL,                 -- 'captured', 'failed' or 'refunded'; a failed attempt may be followed by a captured one
  paid_at TEXT NOT NULL                 -- 'YYYY-MM-DD HH:MM:SS'
);

CREATE TABLE reviews (
  review_id INTEGER PRIMARY KEY,
  product_id INTEGER NOT NULL REFERENCES products(product_id),
  customer_id INTEGER NOT NULL REFERENCES customers(customer_id),
  rating INTEGER NOT NULL CHECK (rating BETWEEN 1 AND 5),
  title TEXT,                           -- NULL when the customer left no title
  created_at TEXT NOT NULL              -- 'YYYY-MM-DD'
);
