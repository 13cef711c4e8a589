// Checks the shipped shop task set the way an outside reviewer would, with code independent of lib/tasks:
// size, every gold verifies (twice, 1-50 identical rows, not all NULL), holdout share, all 30 cells,
// no question pair with word overlap (Jaccard of [a-z0-9]+ sets) > 0.75, no duplicate gold SQL, manifest.
import { test } from "node:test";
import assert from "node:assert/strict";
import Database from "better-sqlite3";
import { createHash } from "node:crypto";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { repoRoot } from "../helpers.js";

const dir = join(repoRoot, "data", "shop");
const tasks = readFileSync(join(dir, "tasks.jsonl"), "utf8").split("\n").filter(Boolean).map((l) => JSON.parse(l));
const manifest = JSON.parse(readFileSync(join(dir, "manifest.json"), "utf8"));

test("the shipped set is large enough and every record is complete", () => {
  assert.ok(tasks.length >= 1500, `${tasks.length} tasks`);
  const ids = new Set<string>();
  for (const t of tasks) {
    for (const k of ["id", "db_id", "db_path", "question", "gold_sql", "difficulty", "archetype", "style", "split", "source"]) assert.equal(typeof t[k], "string", `${t.id} ${k}`);
    assert.equal(t.db_path, "shop.sqlite");
    assert.ok(!ids.has(t.id), `duplicate id ${t.id}`);
    ids.add(t.id);
  }
});

test("ids and splits follow the documented formula; holdout share is 0.18-0.22", () => {
  const sha = (s: string) => createHash("sha256").update(s).digest("hex");
  let holdout = 0;
  for (const t of tasks) {
    const norm = t.question.trim().toLowerCase().replace(/\s+/g, " ");
    assert.equal(t.id, "t2s_" + sha(norm + "\n" + t.db_id).slice(0, 12));
    const h = parseInt(sha(t.id).slice(0, 8), 16) / 2 ** 32 < 0.2;
    assert.equal(t.split, h ? "holdout" : "train");
    if (h) holdout++;
  }
  const share = holdout / tasks.length;
  assert.ok(share >= 0.18 && share <= 0.22, `holdout share ${share}`);
});

test("all 30 archetype x difficulty cells and all four styles are present", () => {
  const cells = new Set(tasks.map((t) => `${t.archetype}/${t.difficulty}`));
  assert.equal(new Set(tasks.map((t) => t.archetype)).size, 10);
  for (const a of new Set(tasks.map((t) => t.archetype))) for (const d of ["easy", "medium", "hard"]) assert.ok(cells.has(`${a}/${d}`), `${a}/${d}`);
  assert.equal(cells.size, 30);
  assert.deepEqual([...new Set(tasks.map((t) => t.style))].sort(), ["analyst", "casual", "formal", "terse"]);
});

test("no duplicate gold SQL and no question pair overlapping more than 0.75", () => {
  const norm = (s: string) => s.toLowerCase().replace(/\s+/g, " ").replace(/\s*;\s*$/, "").trim();
  const sqls = new Set<string>();
  for (const t of tasks) {
    assert.ok(!sqls.has(norm(t.gold_sql)), `duplicate SQL ${t.id}`);
    sqls.add(norm(t.gold_sql));
  }
  const words = tasks.map((t) => new Set<string>(t.question.toLowerCase().match(/[a-z0-9]+/g) ?? []));
  let worst = 0;
  const bad: string[] = [];
  for (let i = 0; i < words.length; i++) {
    const a = words[i];
    for (let j = i + 1; j < words.length; j++) {
      const b = words[j];
      let inter = 0;
      for (const w of a) if (b.has(w)) inter++;
      const jac = inter / (a.size + b.size - inter);
      if (jac > worst) worst = jac;
      if (jac > 0.75) bad.push(`${tasks[i].id} / ${tasks[j].id} overlap ${jac.toFixed(3)}`);
    }
  }
  assert.deepEqual(bad, []);
  assert.ok(worst > 0.5, "the check must see similar pairs at all");
});

test("every gold query runs twice with 1-50 identical rows, not all NULL", () => {
  const db = new Database(join(dir, "shop.sqlite"), { readonly: true, fileMustExist: true });
  try {
    for (const t of tasks) {
      const run = () => db.prepare(t.gold_sql).raw(true).all() as unknown[][];
      const a = run();
      const b = run();
      assert.ok(a.length >= 1 && a.length <= 50, `${t.id}: ${a.length} rows`);
      assert.ok(!a.every((r) => r.every((v) => v === null)), `${t.id}: all NULL`);
      assert.deepEqual(b, a, `${t.id}: unstable`);
    }
  } finally {
    db.close();
  }
});

test("the manifest matches the set and the database", () => {
  const sha = createHash("sha256").update(readFileSync(join(dir, "shop.sqlite"))).digest("hex");
  assert.equal(manifest.db_sha256, sha);
  assert.equal(manifest.counts.count, tasks.length);
  assert.equal(manifest.counts.holdout, tasks.filter((t) => t.split === "holdout").length);
  assert.match(manifest.made_by.command, /^t2s tasks author shop --seed \d+$/);
});
