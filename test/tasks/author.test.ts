import { test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { DirectExecutor } from "../../lib/db/direct-executor.js";
import { authorShopTasks } from "../../lib/tasks/shop/author.js";
import { readInventory } from "../../lib/tasks/shop/inventory.js";
import { writeShopTaskSet } from "../../lib/tasks/shop/ship.js";
import { renderQuestion, STYLES } from "../../lib/tasks/shop/style.js";
import { ARCHETYPES, DIFFICULTIES } from "../../lib/tasks/shop/template.js";
import { SHOP_TEMPLATES } from "../../lib/tasks/shop/templates.js";
import { SeededRandom } from "../../lib/core/random.js";
import { verifyTask } from "../../lib/tasks/verify.js";
import { findDuplicates } from "../../lib/tasks/dedup.js";
import { repoRoot, scratchDir } from "../helpers.js";

const shopDb = join(repoRoot, "data", "shop", "shop.sqlite");

test("templates cover every archetype x difficulty cell and their SQL runs", async () => {
  const cells = new Set(SHOP_TEMPLATES.map((t) => `${t.archetype}/${t.difficulty}`));
  for (const a of ARCHETYPES) for (const d of DIFFICULTIES) assert.ok(cells.has(`${a}/${d}`), `${a}/${d}`);
  assert.equal(new Set(SHOP_TEMPLATES.map((t) => t.name)).size, SHOP_TEMPLATES.length, "template names are unique");
  const inv = readInventory(shopDb);
  const rng = new SeededRandom(9);
  const ex = new DirectExecutor();
  try {
    for (const t of SHOP_TEMPLATES) {
      let good = 0;
      for (let i = 0; i < 8; i++) {
        const d = t.make({ inv, rng });
        if (!d) continue;
        const q = renderQuestion(STYLES[i % 4], d, rng);
        assert.ok(q.length >= 20 && q.length <= 700, `${t.name}: question length ${q.length}`);
        assert.equal(d.columns.length > 0, true);
        const v = await verifyTask({ id: "x", db_id: "shop", db_path: shopDb, question: q, gold_sql: d.sql, difficulty: t.difficulty, archetype: t.archetype, style: "terse", split: "train", source: "t" }, ex);
        assert.notEqual(v?.reason, "sql_error", `${t.name}: ${v?.detail}\n${d.sql}`);
        if (!v) {
          const r = await ex.execute(shopDb, d.sql);
          assert.ok(r.ok && r.columns.length === d.columns.length, `${t.name}: ${d.columns.length} named columns, query returns ${r.ok ? r.columns.length : "error"}`);
          good++;
        }
      }
      assert.ok(good > 0, `${t.name}: no draft verified`);
    }
  } finally {
    await ex.close();
  }
});

test("the author is deterministic per seed and its output is clean", async () => {
  const ex = new DirectExecutor();
  try {
    const a = await authorShopTasks(shopDb, { executor: ex, seed: 5, attempts: 3 });
    const b = await authorShopTasks(shopDb, { executor: ex, seed: 5, attempts: 3 });
    const c = await authorShopTasks(shopDb, { executor: ex, seed: 6, attempts: 3 });
    assert.deepEqual(a.tasks, b.tasks);
    assert.notDeepEqual(a.tasks.map((t) => t.id), c.tasks.map((t) => t.id));
    assert.ok(a.tasks.length > 60);
    assert.deepEqual(findDuplicates(a.tasks), []);
  } finally {
    await ex.close();
  }
});

test("the shipped set is what its manifest's command regenerates", async () => {
  const manifest = JSON.parse(readFileSync(join(repoRoot, "data", "shop", "manifest.json"), "utf8"));
  const seed = Number(/--seed (\d+)/.exec(manifest.made_by.command)?.[1]);
  const out = join(scratchDir(), "tasks.jsonl");
  const ex = new DirectExecutor();
  try {
    await writeShopTaskSet({ dbPath: shopDb, out, seed, executor: ex });
  } finally {
    await ex.close();
  }
  const strip = (text: string) => text.split("\n").filter(Boolean).map((l) => ({ ...JSON.parse(l), db_path: "" }));
  assert.deepEqual(strip(readFileSync(out, "utf8")), strip(readFileSync(join(repoRoot, "data", "shop", "tasks.jsonl"), "utf8")));
  const regenerated = JSON.parse(readFileSync(join(out, "..", "manifest.json"), "utf8"));
  assert.deepEqual(regenerated.counts, manifest.counts);
  assert.equal(regenerated.db_sha256, manifest.db_sha256);
});

test("roll-ups to top-level categories name only top-level categories", async () => {
  const inv = readInventory(shopDb);
  const top = new Set(inv.categories.filter((c) => c.parent_id === null).map((c) => c.name));
  const ex = new DirectExecutor();
  try {
    for (const name of ["jm_revenue_top_category", "sj_parent_product_counts"]) {
      const t = SHOP_TEMPLATES.find((x) => x.name === name);
      assert.ok(t, name);
      const d = t.make({ inv, rng: new SeededRandom(3) });
      assert.ok(d);
      const r = await ex.execute(shopDb, d.sql);
      assert.ok(r.ok && r.rows.length > 0, name);
      for (const row of r.rows) assert.ok(top.has(row[0] as string), `${name}: ${row[0]} is not top-level`);
    }
  } finally {
    await ex.close();
  }
});
