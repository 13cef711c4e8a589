import { test } from "node:test";
import assert from "node:assert/strict";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { runCli, scratchDir } from "../helpers.js";
import { simulateRows } from "./fixtures.js";
import { toJsonl } from "../../lib/core/jsonl.js";
import { readRows } from "../../lib/report/rows.js";
import type { StatRow } from "../../lib/stats/rows.js";

const dir = scratchDir("t2s-mixed-");
const rates = Array.from({ length: 10 }, (_, i) => i / 10);
const run = (seed: number, over: Record<string, unknown>, shift = 0): StatRow[] =>
  simulateRows({ rates: rates.map((p) => Math.min(1, p + shift)), samples: 4, seed }).map((r) => ({ ...r, ...over }));
const base = run(1, { run_id: "base1", policy: "openai:m@http://h:1/v1", model: "m", adapter: null });
const r1 = run(2, { run_id: "r1", policy: "openai:m-r1@http://h:1/v1", model: "m-r1", adapter: null }, 0.3);
const write = (name: string, rows: StatRow[]) => {
  const p = join(dir, name);
  writeFileSync(p, toJsonl(rows));
  return p;
};

test("base and round-1 rows concatenated in one file are refused, in either order, not taken for duplicates", async () => {
  for (const rows of [[...base, ...r1], [...r1, ...base]]) {
    const r = await runCli(["report", "--rows", write("concat.jsonl", rows)]);
    assert.equal(r.code, 1);
    assert.match(r.stderr, /^error \[mixed_runs\]: .*holds rows of different runs \(model m, adapter none; model m-r1, adapter none\)/);
  }
  // reported apart, each run gives its own numbers
  const file = write("concat.jsonl", [...base, ...r1]);
  const a = JSON.parse((await runCli(["report", "--rows", file, "--run", "base1", "--json", "--B", "200"])).stdout);
  const b = JSON.parse((await runCli(["report", "--rows", file, "--run", "r1", "--json", "--B", "200"])).stdout);
  const alone = JSON.parse((await runCli(["report", "--rows", write("r1.jsonl", r1), "--json", "--B", "200"])).stdout);
  assert.equal(a.n_rows, 40);
  assert.deepEqual(b, alone);
  const none = await runCli(["report", "--rows", file, "--run", "nope"]);
  assert.match(none.stderr, /error \[no_rows\]: .*no rows of run_id nope; its run ids: base1, r1/);
});

test("another model relabelled as a second eval run is refused, not pooled as 2 eval runs; the notebook reader refuses it too", async () => {
  const file = write("relabel.jsonl", [...base, ...r1.map((r) => ({ ...r, eval_run: "1" }))]);
  const r = await runCli(["report", "--rows", file]);
  assert.equal(r.code, 1);
  assert.match(r.stderr, /mixed_runs/);
  assert.throws(() => readRows(file), (e: Error & { code?: string }) => e.code === "mixed_runs");
});

test("two seeds of one model under one eval run label are refused; as two eval runs they are replications", async () => {
  const seed2 = run(3, { run_id: "base2", policy: "openai:m@http://h:2/v1", model: "m", adapter: null });
  const same = await runCli(["report", "--rows", write("seeds.jsonl", [...base, ...seed2])]);
  assert.equal(same.code, 1);
  assert.match(same.stderr, /mixed_runs.*eval run 0: policy openai:m@http:\/\/h:1\/v1 and openai:m@http:\/\/h:2\/v1/);
  const samePolicy = await runCli(["report", "--rows", write("seeds2.jsonl", [...base, ...seed2.map((r) => ({ ...r, policy: base[0].policy }))])]);
  assert.match(samePolicy.stderr, /mixed_runs.*task t0000 sample 0 drawn by run_id base1 and base2/);
  const reps = await runCli(["report", "--rows", write("reps.jsonl", [...base, ...seed2.map((r) => ({ ...r, eval_run: "1" }))]), "--B", "200"]);
  assert.equal(reps.code, 0, reps.stderr);
  assert.match(reps.stdout, /80 rows, 10 tasks, 2 eval runs/);
  // a resume's repeat within one run stays a duplicate, dropped and said
  const resumed = await runCli(["report", "--rows", write("resumed.jsonl", [...base, base[0]]), "--B", "200"]);
  assert.equal(resumed.code, 0, resumed.stderr);
  assert.match(resumed.stdout, /de-duplicated .*dropped 1 row/);
});

test("delta reads both sidecars and flags another database, task set or prompt", async () => {
  const a = write("a.jsonl", base);
  const b = write("b.jsonl", r1);
  const meta = (over: Record<string, unknown>) => JSON.stringify({ run_id: "x", prompt_hash: "p1", tasks_hash: "t1", db_sha256: { shop: "a".repeat(64) }, ...over });
  writeFileSync(`${a}.meta.json`, meta({}));
  writeFileSync(`${b}.meta.json`, meta({}));
  const same = await runCli(["delta", "--a", a, "--b", b, "--B", "200"]);
  assert.equal(same.code, 0, same.stderr);
  assert.doesNotMatch(same.stderr, /not like for like/);
  writeFileSync(`${b}.meta.json`, meta({ prompt_hash: "p2", tasks_hash: "t2", db_sha256: { shop: "b".repeat(64) } }));
  const diff = await runCli(["delta", "--a", a, "--b", b, "--B", "200"]);
  assert.equal(diff.code, 0, diff.stderr);
  assert.match(diff.stderr, /warning: not like for like: database shop differs \(db_sha256 aaaaaaaaaaaa vs bbbbbbbbbbbb\)/);
  assert.match(diff.stderr, /task sets differ \(tasks_hash t1 vs t2\)/);
  assert.match(diff.stderr, /prompt templates differ \(prompt_hash p1 vs p2\)/);
  const json = JSON.parse((await runCli(["delta", "--a", a, "--b", b, "--B", "200", "--json"])).stdout);
  assert.equal(json.setup_differences.length, 3);
});

test("rows added to one run under --force with another setup are reported with a warning naming the differences", async () => {
  const file = write("forced.jsonl", base);
  writeFileSync(`${file}.meta.json`, JSON.stringify({ run_id: "base1", prompt_hash: "p", tasks_hash: "t", forced: ["sampling.temperature: 0.7 -> 1"] }));
  const r = await runCli(["report", "--rows", file, "--B", "200"]);
  assert.equal(r.code, 0, r.stderr);
  assert.match(r.stderr, /warning: .*forced\.jsonl: rows were added under --force with another setup \(sampling\.temperature: 0\.7 -> 1\)/);
});
