/**
 * Fixed reference data of the shop: the category tree, the product catalogue, staff, places and names.
 * Random choices are made elsewhere (generate.ts) from a seed; this file only lists what can be chosen.
 */

export interface CategorySpec {
  name: string;
  /** Name of the parent category; undefined for a top-level one. */
  parent?: string;
}

/** Three levels deep in places (Electronics > Audio > Headphones), and one category left empty. */
export const CATEGORIES: CategorySpec[] = [
  { name: "Kitchen" },
  { name: "Coffee & Tea", parent: "Kitchen" },
  { name: "Coffee Makers", parent: "Coffee & Tea" },
  { name: "Cookware", parent: "Kitchen" },
  { name: "Knives & Boards", parent: "Kitchen" },
  { name: "Electronics" },
  { name: "Audio", parent: "Electronics" },
  { name: "Headphones", parent: "Audio" },
  { name: "Speakers", parent: "Audio" },
  { name: "Smart Home", parent: "Electronics" },
  { name: "Computer Accessories", parent: "Electronics" },
  { name: "Outdoors" },
  { name: "Camping", parent: "Outdoors" },
  { name: "Cycling", parent: "Outdoors" },
  { name: "Garden", parent: "Outdoors" },
  { name: "Home Office" },
  { name: "Desk Accessories", parent: "Home Office" },
  { name: "Stationery", parent: "Home Office" },
  { name: "Gift Cards" },
];

export interface ProductSpec {
  name: string;
  category: string;
  price: number;
}

export const SKU_PREFIX: Record<string, string> = {
  Kitchen: "KIT",
  Electronics: "ELE",
  Outdoors: "OUT",
  "Home Office": "OFF",
};

export const PRODUCTS: ProductSpec[] = [
  { name: "Brewline 12-Cup Drip Coffee Maker", category: "Coffee Makers", price: 79.99 },
  { name: "Aurora Espresso Machine", category: "Coffee Makers", price: 349.0 },
  { name: "Stovetop Moka Pot 6-Cup", category: "Coffee Makers", price: 34.5 },
  { name: "Glass Pour-Over Set", category: "Coffee & Tea", price: 42.0 },
  { name: "Gooseneck Electric Kettle", category: "Coffee & Tea", price: 64.99 },
  { name: "Loose Leaf Tea Sampler", category: "Coffee & Tea", price: 24.99 },
  { name: "Burr Coffee Grinder", category: "Coffee & Tea", price: 119.0 },
  { name: "Cast Iron Skillet 10in", category: "Cookware", price: 39.99 },
  { name: "Nonstick Frying Pan 12in", category: "Cookware", price: 49.5 },
  { name: "Enameled Dutch Oven 5qt", category: "Cookware", price: 129.0 },
  { name: "Stainless Saucepan Set", category: "Cookware", price: 159.99 },
  { name: "Chef's Knife 8in", category: "Knives & Boards", price: 89.0 },
  { name: "Walnut Cutting Board", category: "Knives & Boards", price: 54.0 },
  { name: "Paring Knife Trio", category: "Knives & Boards", price: 29.99 },
  { name: "Kitchen Scale Digital", category: "Kitchen", price: 22.5 },
  { name: "Silicone Utensil Set", category: "Kitchen", price: 18.99 },
  { name: "Studio Over-Ear Headphones", category: "Headphones", price: 199.0 },
  { name: "Wireless Earbuds Pro", category: "Headphones", price: 129.99 },
  { name: "Kids Volume-Limited Headphones", category: "Headphones", price: 24.99 },
  { name: "Portable Bluetooth Speaker", category: "Speakers", price: 59.99 },
  { name: "Bookshelf Speaker Pair", category: "Speakers", price: 249.0 },
  { name: "Soundbar 2.1", category: "Speakers", price: 299.0 },
  { name: "USB-C DAC Adapter", category: "Audio", price: 39.0 },
  { name: "Smart Plug 4-Pack", category: "Smart Home", price: 34.99 },
  { name: "Video Doorbell", category: "Smart Home", price: 149.0 },
  { name: "Smart Thermostat", category: "Smart Home", price: 189.0 },
  { name: "Wi-Fi Mesh Router Kit", category: "Smart Home", price: 279.0 },
  { name: "Mechanical Keyboard", category: "Computer Accessories", price: 109.0 },
  { name: "Ergonomic Wireless Mouse", category: "Computer Accessories", price: 49.99 },
  { name: "27in 4K Monitor", category: "Computer Accessories", price: 399.0 },
  { name: "USB-C Docking Station", category: "Computer Accessories", price: 159.0 },
  { name: "HD Webcam", category: "Computer Accessories", price: 69.99 },
  { name: "Two-Person Dome Tent", category: "Camping", price: 139.0 },
  { name: "Down Sleeping Bag", category: "Camping", price: 179.0 },
  { name: "Camping Stove", category: "Camping", price: 59.0 },
  { name: "LED Headlamp", category: "Camping", price: 19.99 },
  { name: "Insulated Water Bottle", category: "Outdoors", price: 27.5 },
  { name: "Bike Helmet MIPS", category: "Cycling", price: 89.99 },
  { name: "Bike Light Set", category: "Cycling", price: 44.0 },
  { name: "Mini Floor Pump", category: "Cycling", price: 32.0 },
  { name: "Raised Garden Bed", category: "Garden", price: 119.99 },
  { name: "Pruning Shears", category: "Garden", price: 26.0 },
  { name: "Drip Irrigation Kit", category: "Garden", price: 54.99 },
  { name: "Standing Desk Converter", category: "Desk Accessories", price: 229.0 },
  { name: "Monitor Arm", category: "Desk Accessories", price: 89.0 },
  { name: "Desk Lamp with Wireless Charger", category: "Desk Accessories", price: 59.99 },
  { name: "Cable Management Tray", category: "Desk Accessories", price: 21.99 },
  { name: "Dotted Notebook A5", category: "Stationery", price: 14.5 },
  { name: "Fountain Pen", category: "Stationery", price: 38.0 },
  { name: "Gel Pen 12-Pack", category: "Stationery", price: 11.99 },
];

export interface EmployeeSpec {
  first: string;
  last: string;
  department: "Sales" | "Support" | "Warehouse" | "Marketing" | "Management";
  hire: string;
  salary: number;
  /** Index (0-based) of the manager in this list; undefined for the head of the company. */
  manager?: number;
}

/** A four-level hierarchy: CEO > heads > leads > staff. Sales reps are the Sales department. */
export const EMPLOYEES: EmployeeSpec[] = [
  { first: "Margaret", last: "Okafor", department: "Management", hire: "2016-03-01", salary: 210000 },
  { first: "Daniel", last: "Fischer", department: "Management", hire: "2017-06-12", salary: 165000, manager: 0 },
  { first: "Priya", last: "Raman", department: "Management", hire: "2018-01-08", salary: 158000, manager: 0 },
  { first: "Tomas", last: "Novak", department: "Sales", hire: "2018-09-03", salary: 98000, manager: 1 },
  { first: "Chloe", last: "Martin", department: "Sales", hire: "2019-04-15", salary: 72000, manager: 3 },
  { first: "Kenji", last: "Watanabe", department: "Sales", hire: "2020-02-10", salary: 69500, manager: 3 },
  { first: "Lucia", last: "Romero", department: "Sales", hire: "2021-11-22", salary: 64000, manager: 3 },
  { first: "Oliver", last: "Brown", department: "Sales", hire: "2024-03-04", salary: 61000, manager: 3 },
  { first: "Hannah", last: "Schmidt", department: "Sales", hire: "2025-05-19", salary: 60000, manager: 3 },
  { first: "Samuel", last: "Adeyemi", department: "Support", hire: "2019-07-01", salary: 82000, manager: 2 },
  { first: "Emma", last: "Johansson", department: "Support", hire: "2021-03-29", salary: 52000, manager: 9 },
  { first: "Mateo", last: "Silva", department: "Support", hire: "2023-08-14", salary: 50500, manager: 9 },
  { first: "Grace", last: "Kowalski", department: "Warehouse", hire: "2018-05-21", salary: 76000, manager: 2 },
  { first: "Ahmed", last: "Hassan", department: "Warehouse", hire: "2020-10-05", salary: 45000, manager: 12 },
  { first: "Sofia", last: "Bianchi", department: "Warehouse", hire: "2022-06-27", salary: 43500, manager: 12 },
  { first: "Liam", last: "O'Connor", department: "Marketing", hire: "2019-09-16", salary: 88000, manager: 1 },
  { first: "Zoe", last: "Dubois", department: "Marketing", hire: "2023-01-09", salary: 58000, manager: 15 },
];

export interface CountrySpec {
  code: string;
  weight: number;
  cities: string[];
}

/** Fifteen countries; some city names exist in two countries (London, Cambridge, Paris, Perth). */
export const COUNTRIES: CountrySpec[] = [
  { code: "US", weight: 24, cities: ["New York", "Austin", "Seattle", "Chicago", "Cambridge", "Paris"] },
  { code: "GB", weight: 11, cities: ["London", "Manchester", "Cambridge", "Bristol", "Perth"] },
  { code: "DE", weight: 10, cities: ["Berlin", "Munich", "Hamburg", "Cologne"] },
  { code: "CA", weight: 8, cities: ["Toronto", "Vancouver", "Montreal", "London"] },
  { code: "FR", weight: 7, cities: ["Paris", "Lyon", "Marseille", "Toulouse"] },
  { code: "AU", weight: 6, cities: ["Sydney", "Melbourne", "Brisbane", "Perth"] },
  { code: "NL", weight: 5, cities: ["Amsterdam", "Rotterdam", "Utrecht"] },
  { code: "ES", weight: 5, cities: ["Madrid", "Barcelona", "Valencia"] },
  { code: "IT", weight: 5, cities: ["Rome", "Milan", "Turin"] },
  { code: "SE", weight: 4, cities: ["Stockholm", "Gothenburg", "Malmo"] },
  { code: "JP", weight: 4, cities: ["Tokyo", "Osaka", "Kyoto"] },
  { code: "PL", weight: 3, cities: ["Warsaw", "Krakow", "Gdansk"] },
  { code: "BR", weight: 3, cities: ["Sao Paulo", "Rio de Janeiro", "Curitiba"] },
  { code: "MX", weight: 3, cities: ["Mexico City", "Guadalajara", "Monterrey"] },
  { code: "NZ", weight: 2, cities: ["Auckland", "Wellington", "Christchurch"] },
];

export const FIRST_NAMES = [
  "Alice", "Ben", "Carla", "David", "Elena", "Farid", "Gina", "Hugo", "Ines", "Jack", "Keiko", "Leo",
  "Maya", "Nikolai", "Olga", "Pablo", "Quinn", "Rosa", "Stefan", "Tara", "Umar", "Vera", "Wei", "Ximena",
  "Yusuf", "Zara", "Anna", "Bruno", "Camille", "Diego", "Erik", "Fatima", "George", "Helen", "Ivan",
  "Julia", "Karim", "Laura", "Marco", "Nora",
];

export const LAST_NAMES = [
  "Smith", "Garcia", "Muller", "Rossi", "Dubois", "Tanaka", "Kowalski", "Jensen", "Silva", "Nguyen",
  "Patel", "Andersson", "Moreau", "Lopez", "Schneider", "Costa", "Yamamoto", "Novak", "Walker", "Bakker",
  "Ferrari", "Lindqvist", "Sato", "Hernandez", "Wilson", "Kim", "Fischer", "Martins", "Clarke", "Weber",
];

export const EMAIL_DOMAINS = ["example.com", "mail.test", "inbox.test", "post.example.org"];

export const REVIEW_TITLES: Record<number, string[]> = {
  5: ["Love it", "Exactly as described", "Best purchase this year", "Excellent quality", "Highly recommend"],
  4: ["Very good", "Solid value", "Works well", "Happy with it", "Nice, minor quibbles"],
  3: ["It's okay", "Does the job", "Average", "Mixed feelings"],
  2: ["Disappointed", "Not as pictured", "Flimsy"],
  1: ["Broke after a week", "Do not buy", "Returned it", "Waste of money"],
};
