import { test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { sqlDuplicateKey } from "../../lib/tasks/dedup.js";
import { DirectExecutor } from "../../lib/db/direct-executor.js";
import { readTasks } from "../../lib/tasks/io.js";
import { augmentTrainingTasks } from "../../lib/tasks/shop/augment.js";
import { splitFor, taskId } from "../../lib/tasks/split.js";
import { verifyTask } from "../../lib/tasks/verify.js";
import { repoRoot, runCli, scratchDir } from "../helpers.js";

const shopDb = join(repoRoot, "data", "shop", "shop.sqlite");
const shippedFile = join(repoRoot, "data", "shop", "tasks.jsonl");
const shipped = readTasks(shippedFile);

test("augment: deterministic per seed, train split only, no overlap with the excluded set or itself, golds verify", async () => {
  const ex = new DirectExecutor();
  try {
    const a = await augmentTrainingTasks(shopDb, { executor: ex, seed: 3, attempts: 4, exclude: shipped });
    const b = await augmentTrainingTasks(shopDb, { executor: ex, seed: 3, attempts: 4, exclude: shipped });
    const c = await augmentTrainingTasks(shopDb, { executor: ex, seed: 4, attempts: 4, exclude: shipped });
    assert.deepEqual(a, b);
    assert.notDeepEqual(a.tasks.map((t) => t.id), c.tasks.map((t) => t.id));
    assert.ok(a.tasks.length > 50, `kept ${a.tasks.length}`);
    const dropped = Object.values(a.dropped).reduce((s, n) => s + n, 0);
    assert.equal(a.tasks.length + dropped - (a.dropped.no_values ?? 0), a.candidates);
    assert.ok((a.dropped.in_exclude_sql ?? 0) > 0, "some drafts repeat a shipped gold query and are dropped");

    const ids = new Set(shipped.map((t) => t.id));
    const sqls = new Set(shipped.map((t) => sqlDuplicateKey(t.gold_sql)));
    const perTemplate = new Map<string, number>();
    for (const t of a.tasks) {
      assert.equal(t.split, "train");
      assert.equal(splitFor(t.id), "train");
      assert.equal(t.id, taskId(t.question, "shop"));
      assert.ok(!ids.has(t.id), `${t.id} is a shipped id`);
      assert.ok(!sqls.has(sqlDuplicateKey(t.gold_sql)), `${t.id} repeats a shipped gold query`);
      assert.match(t.source, /^shop-augment:[a-z0-9_]+:seed3$/);
      perTemplate.set(t.source, (perTemplate.get(t.source) ?? 0) + 1);
    }
    assert.ok([...perTemplate.values()].every((n) => n <= 4));
    assert.equal(new Set(a.tasks.map((t) => t.id)).size, a.tasks.length);
    assert.equal(new Set(a.tasks.map((t) => sqlDuplicateKey(t.gold_sql))).size, a.tasks.length);
    for (const t of a.tasks.filter((_, i) => i % 10 === 0)) assert.equal(await verifyTask(t, ex), null, `${t.id}: ${t.gold_sql}`);

    // excluding the output itself leaves nothing for the same seed
    const again = await augmentTrainingTasks(shopDb, { executor: ex, seed: 3, attempts: 4, exclude: [...shipped, ...a.tasks] });
    assert.deepEqual(again.tasks, []);

    // more phrasings per query: some queries come with two questions, none with three, still no overlap
    const p2 = await augmentTrainingTasks(shopDb, { executor: ex, seed: 3, attempts: 12, exclude: shipped, phrasings: 2 });
    const perQuery = new Map<string, number>();
    for (const t of p2.tasks) perQuery.set(sqlDuplicateKey(t.gold_sql), (perQuery.get(sqlDuplicateKey(t.gold_sql)) ?? 0) + 1);
    assert.ok([...perQuery.values()].some((n) => n === 2) && [...perQuery.values()].every((n) => n <= 2));
    assert.equal(new Set(p2.tasks.map((t) => t.id)).size, p2.tasks.length);
    assert.ok(p2.tasks.every((t) => t.split === "train" && !ids.has(t.id) && !sqls.has(sqlDuplicateKey(t.gold_sql))));
  } finally {
    await ex.close();
  }
});

test("t2s tasks augment writes a train-only file and refuses to overwrite --exclude", async () => {
  const dir = scratchDir("t2s-augment-");
  const out = join(dir, "extra.jsonl");
  const r = await runCli(["tasks", "augment", "--seed", "2", "--attempts", "2", "--out", out, "--workers", "1", "--json"]);
  assert.equal(r.code, 0, r.stderr);
  const s = JSON.parse(r.stdout);
  const written = readTasks(out);
  assert.equal(s.kept, written.length);
  assert.ok(written.length > 0 && written.every((t) => t.split === "train" && t.db_path === shopDb));
  assert.equal(Object.values(s.by_archetype as Record<string, number>).reduce((x, y) => x + y, 0), written.length);
  const before = readFileSync(shippedFile, "utf8");
  const bad = await runCli(["tasks", "augment", "--out", shippedFile]);
  assert.equal(bad.code, 2);
  assert.match(bad.stderr, /is the --exclude file/);
  assert.equal(readFileSync(shippedFile, "utf8"), before);
});
