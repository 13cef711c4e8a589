import { test } from "node:test";
import assert from "node:assert/strict";
import { join } from "node:path";
import { runCli, scratchDir } from "../helpers.js";
import { defaultShopPath } from "../../lib/db/shop/build.js";

const shop = defaultShopPath();

test("t2s exec prints a readable table", async () => {
  const r = await runCli(["exec", "--db", shop, "--max-rows", "2", "SELECT category_id, name, parent_id FROM categories ORDER BY category_id"]);
  assert.equal(r.code, 0, r.stderr);
  const lines = r.stdout.trimEnd().split("\n");
  assert.match(lines[0], /^category_id \| name\s+\| parent_id$/);
  assert.match(lines[1], /^-+-\+-/);
  assert.match(lines[2], /^\s+1 \| Kitchen\s+\|\s+NULL$/);
  assert.match(lines[4], /\(2 rows, truncated: more rows exist, [\d.]+ ms\)/);
});

test("t2s exec --json reports an unsafe statement and exits 1; a runaway times out", async () => {
  const r = await runCli(["exec", "--db", shop, "--json", "DELETE FROM orders"]);
  assert.equal(r.code, 1);
  assert.equal(JSON.parse(r.stdout).error.kind, "unsafe");
  const slow = await runCli(["exec", "--db", shop, "--json", "--timeout-ms", "300", "WITH RECURSIVE n(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM n) SELECT count(*) FROM n"]);
  assert.equal(slow.code, 1);
  assert.equal(JSON.parse(slow.stdout).error.kind, "timeout");
});

test("t2s exec --jsonl answers every line in order and survives malformed lines", async () => {
  const input = ['{"sql": "SELECT 1 AS a"}', "not json", '{"id": "q3", "sql": "PRAGMA user_version"}', '{"id": 7, "nosql": 1}', "", '{"sql": "SELECT count(*) FROM orders"}'].join("\n") + "\n";
  const r = await runCli(["exec", "--db", shop, "--jsonl", "--workers", "1"], { input });
  assert.equal(r.code, 0, r.stderr);
  const out = r.stdout.trimEnd().split("\n").map((l) => JSON.parse(l));
  assert.equal(out.length, 6, "one output line per input line, blank ones included");
  assert.deepEqual(out[0], { ok: true, columns: ["a"], rows: [[1]], elapsedMs: out[0].elapsedMs, truncated: false });
  assert.equal(out[1].error.kind, "bad_input");
  assert.match(out[1].error.message, /line 2/);
  assert.equal(out[2].id, "q3");
  assert.equal(out[2].error.kind, "unsafe");
  assert.equal(out[3].error.kind, "bad_input");
  assert.equal(out[3].id, 7, "a bad_input answer keeps the line's id");
  assert.equal(out[4].error.kind, "bad_input");
  assert.match(out[4].error.message, /line 5: blank line/);
  assert.deepEqual(out[5].rows, [[300]]);
});

test("t2s db build shop and t2s db schema", async () => {
  const out = join(scratchDir("t2s-cli-db-"), "shop.sqlite");
  const b = await runCli(["db", "build", "shop", "--seed", "42", "--out", out, "--json"]);
  assert.equal(b.code, 0, b.stderr);
  const built = JSON.parse(b.stdout);
  assert.equal(built.path, out);
  assert.equal(built.seed, 42);
  const again = await runCli(["db", "build", "shop", "--seed", "5", "--out", out]);
  assert.equal(again.code, 1, "an existing database is not overwritten");
  assert.match(again.stderr, /^error \[output_exists\]: .*shop\.sqlite already exists .*--force/);
  // the default seed: were it overwritten, the committed file would get its own bytes back
  const committed = await runCli(["db", "build", "shop"]);
  assert.equal(committed.code, 1, "nor is the committed one");
  assert.equal(JSON.parse((await runCli(["db", "hash", "--db", out, "--json"])).stdout).sha256, built.sha256);
  const forced = await runCli(["db", "build", "shop", "--seed", "42", "--out", out, "--force", "--json"]);
  assert.equal(forced.code, 0, forced.stderr);
  const h = await runCli(["db", "hash", "--db", defaultShopPath(), "--json"]);
  assert.equal(JSON.parse(h.stdout).sha256, built.sha256);
  const s = await runCli(["db", "schema", "--db", out, "--samples", "1", "--tables", "employees"]);
  assert.equal(s.code, 0, s.stderr);
  assert.match(s.stdout, /^CREATE TABLE employees \(/);
  assert.match(s.stdout, /manager_id INTEGER REFERENCES employees\(employee_id\) -- direct manager; NULL for the head of the company; samples: \d+/);
});

test("usage errors exit 2 with a message", async () => {
  const cases: [string[], RegExp][] = [
    [["exec", "--db", shop], /missing the SQL/],
    [["exec", "--db", shop, "--jsonl", "SELECT 1"], /not both/],
    [["exec", "--db", shop, "--timeout-ms", "abc", "SELECT 1"], /--timeout-ms must be an integer/],
    [["db", "build", "bakery"], /only 'shop'/],
  ];
  for (const [args, re] of cases) {
    const r = await runCli(args);
    assert.equal(r.code, 2, args.join(" "));
    assert.match(r.stderr, re);
  }
  const missing = await runCli(["db", "schema", "--db", join(scratchDir(), "none.sqlite")]);
  assert.equal(missing.code, 1);
  assert.match(missing.stderr, /no_database/);
});
