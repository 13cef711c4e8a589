import { test } from "node:test";
import assert from "node:assert/strict";
import { spawn, spawnSync } from "node:child_process";
import { mkdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { runCli, scratchDir, t2sBin } from "../helpers.js";
import { startFakeOpenAI } from "../support/fake-openai.js";
import { ITEM_TASKS, fenced, makeItemsDb, writeItemTasks } from "../support/fixtures.js";
import { RowsStore } from "../../lib/runs/store.js";
import type { RolloutRow } from "../../lib/runs/row.js";

// a private mount namespace lets the test mount a small tmpfs without touching the machine's mounts
const unshareArgs = process.getuid?.() === 0 ? ["-m"] : ["-Urm"];
const canMount = spawnSync("unshare", [...unshareArgs, "sh", "-c", "mount -t tmpfs -o size=64k tmpfs /mnt"]).status === 0;

/** Inside its own namespace: mounts a 1 MiB tmpfs, runs the benchmark on it, fills the disk once rows land and frees it right after the next append was tried, copies the rows out. */
const SCRIPT = `
M="$1"; COPY="$2"; shift 2
mkdir -p "$M" && mount -t tmpfs -o size=1m tmpfs "$M" || exit 97
"$@" --out "$M/rows.jsonl" 2> "$COPY/stderr" & pid=$!
while [ "$(cat "$M/rows.jsonl" 2>/dev/null | wc -l)" -lt 6 ]; do sleep 0.01; done
dd if=/dev/zero of="$M/fill" bs=4k 2>/dev/null
t0="$(stat -c %y "$M/rows.jsonl")"; n=0
# full until the next append has been tried (the rows file's mtime moves) or the run has stopped (an append
# cut short just before t0 was read leaves the mtime as it is when the next one fails); a hang guard of 10 minutes
while [ "$(stat -c %y "$M/rows.jsonl")" = "$t0" ] && kill -0 $pid 2>/dev/null && [ $n -lt 60000 ]; do sleep 0.01; n=$((n+1)); done
rm -f "$M/fill"
wait $pid; echo $? > "$COPY/code"
cp "$M/rows.jsonl" "$M/rows.jsonl.meta.json" "$COPY/"
`;

test("a disk full for a moment mid-run: the rows file keeps only whole rows, no row lands after the failure, and running again completes it", { skip: canMount ? false : "needs mount namespaces (unshare) to mount a small tmpfs" }, async () => {
  const gold = new Map(ITEM_TASKS.map((t) => [t.question, t.gold_sql]));
  const server = await startFakeOpenAI(async (req) => {
    // latencies spread by seed, so episodes are still in flight when the disk has room again
    await new Promise((r) => setTimeout(r, 250 + (Number(req.body.seed) % 7) * 70));
    // rows over a page (4 KiB) each, so the first append on the full disk is cut short mid-row
    return { content: `${"Let me think. ".repeat(400)}\n${fenced(gold.get(req.question)!)}` };
  });
  try {
    const dir = scratchDir();
    makeItemsDb(dir);
    const tasks = writeItemTasks(dir);
    const copy = join(dir, "copy");
    mkdirSync(copy);
    const bench = [process.execPath, t2sBin, "benchmark", "--policy", `openai:fake@${server.baseUrl}`, "--tasks", tasks, "--k", "8", "--concurrency", "4", "--workers", "1", "--quiet"];
    const child = spawn("unshare", [...unshareArgs, "sh", "-c", SCRIPT, "sh", join(dir, "disk"), copy, ...bench], { stdio: "inherit" });
    await new Promise((r) => child.on("close", r));
    const rowsPath = join(copy, "rows.jsonl");
    const text = readFileSync(rowsPath, "utf8");
    assert.ok(text.endsWith("\n"), "the file ends on a whole row");
    const before = text.split("\n").filter(Boolean);
    before.forEach((l, i) => assert.doesNotThrow(() => JSON.parse(l), `line ${i + 1} is a whole row`));
    assert.ok(before.length >= 6 && before.length < ITEM_TASKS.length * 8);
    assert.equal(readFileSync(join(copy, "code"), "utf8").trim(), "1", "the run stops on the failed write");
    assert.match(readFileSync(join(copy, "stderr"), "utf8"), /error \[write_failed\]: .*rows\.jsonl: could not append a row \(ENOSPC/);

    const again = await runCli([...bench.slice(2), "--out", rowsPath, "--json"]);
    assert.equal(again.code, 0, again.stderr);
    const after = readFileSync(rowsPath, "utf8").split("\n").filter(Boolean);
    assert.deepEqual(after.slice(0, before.length), before, "every row written before the failure is kept");
    assert.equal(after.length, ITEM_TASKS.length * 8);
    assert.equal(new Set(after.map((l) => { const r = JSON.parse(l) as RolloutRow; return `${r.task_id}/${r.sample}`; })).size, after.length);
  } finally {
    await server.close();
  }
});

test("a store whose append failed takes no more rows; the file reopens with its complete rows", () => {
  const dir = scratchDir();
  const path = join(dir, "rows.jsonl");
  const row = (sample: number) => ({ run_id: "r", eval_run: "0", task_id: "t", sample }) as unknown as RolloutRow;
  const { store } = RowsStore.open(path);
  store.append(row(0));
  // a row that cannot be serialized fails the append; the store then takes no more rows
  const bad = { ...row(1), n: 1n } as unknown as RolloutRow;
  assert.throws(() => store.append(bad));
  assert.throws(() => store.append(row(2)), (e: Error & { code?: string }) => e.code === "write_failed" && /no more rows/.test(e.message));
  assert.equal(RowsStore.open(path).store.rows.length, 1);
});
