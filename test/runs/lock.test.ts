import { test } from "node:test";
import assert from "node:assert/strict";
import { spawn, spawnSync } from "node:child_process";
import { existsSync, readdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { currentHolder, lockRows, processStart, removeDeadTemps, takeLock } from "../../lib/runs/lock.js";
import { repoRoot, scratchDir } from "../helpers.js";

function deadPid(): number {
  return Number(spawnSync(process.execPath, ["-e", "process.stdout.write(String(process.pid))"]).stdout.toString());
}

test("one writer per rows file: a live holder refuses, a dead holder's lock is taken over, release removes it", () => {
  const rows = join(scratchDir(), "rows.jsonl");
  const release = lockRows(rows);
  assert.ok(existsSync(`${rows}.lock`));
  assert.throws(() => lockRows(rows), /in use by this process/);
  // a different live process (the parent of this test), in the bare-pid form older locks have
  writeFileSync(`${rows}.lock`, String(process.ppid));
  assert.throws(() => lockRows(rows), /busy|in use by process/);
  writeFileSync(`${rows}.lock`, String(deadPid()));
  const again = lockRows(rows);
  assert.equal(JSON.parse(readFileSync(`${rows}.lock`, "utf8")).pid, process.pid);
  again();
  assert.ok(!existsSync(`${rows}.lock`));
  release();
});

test("a live pid that is not the holder (another start time, another boot) does not keep the lock busy", () => {
  const dir = scratchDir();
  const lock = join(dir, "x.lock");
  const parent = { pid: process.ppid, start: processStart(process.ppid), boot: currentHolder().boot };
  assert.ok(parent.start, "needs /proc");
  writeFileSync(lock, JSON.stringify(parent));
  assert.throws(() => takeLock(lock, "x"), (e: Error & { code?: string }) => e.code === "busy" && /process \d+/.test(e.message));
  // same live pid, recorded with another start time: the pid was reused, the holder is gone
  writeFileSync(lock, JSON.stringify({ ...parent, start: "1" }));
  takeLock(lock, "x")();
  // recorded on another boot
  writeFileSync(lock, JSON.stringify({ ...parent, boot: "00000000-0000-0000-0000-000000000000" }));
  takeLock(lock, "x")();
  // an empty lock (a writer killed between create and write, by older versions) is stale
  writeFileSync(lock, "");
  takeLock(lock, "x")();
  assert.deepEqual(readdirSync(dir), []);
});

test("two processes taking over one dead holder's lock at the same moment: exactly one holds it, every trial", async () => {
  const dir = scratchDir();
  const trials = 40;
  const dead = deadPid();
  for (let i = 0; i < trials; i++) writeFileSync(join(dir, `rows-${i}.lock`), String(dead));
  // Each child says "ready" once started, waits for the common start time on stdin, takes trial i's lock at
  // start + i * 100 ms, prints its results and stays alive until stdin closes: neither can exit (and so
  // leave its locks to the other as a dead holder's) before both are done, however slowly either starts.
  const script = `
    import { takeLock } from ${JSON.stringify(join(repoRoot, "lib/runs/lock.ts"))};
    process.stdout.write("ready\\n");
    let input = "";
    process.stdin.on("data", (d) => {
      input += d;
      if (!input.includes("\\n")) return;
      const t0 = Number(input.trim());
      const out = [];
      for (let i = 0; i < ${trials}; i++) {
        while (Date.now() < t0 + i * 100) {}
        try { takeLock(${JSON.stringify(dir)} + "/rows-" + i + ".lock", "rows"); out.push("held"); } catch (e) { out.push(e.code); }
      }
      process.stdout.write(JSON.stringify(out) + "\\n");
    });
  `;
  const start = () => {
    const child = spawn(process.execPath, ["--import", "tsx", "--input-type=module", "-e", script], { cwd: repoRoot, stdio: ["pipe", "pipe", "inherit"] });
    let out = "";
    const lines: Array<(line: string) => void> = [];
    child.stdout.on("data", (d) => {
      out += d;
      for (let nl = out.indexOf("\n"); nl >= 0; nl = out.indexOf("\n")) {
        const line = out.slice(0, nl);
        out = out.slice(nl + 1);
        lines.shift()?.(line);
      }
    });
    const nextLine = () => new Promise<string>((resolve, reject) => {
      lines.push(resolve);
      child.once("close", (code) => reject(new Error(`the lock-taking child ended early (exit ${code})`)));
    });
    return { child, nextLine };
  };
  const a = start();
  const b = start();
  const [readyA, readyB] = [a.nextLine(), b.nextLine()];
  assert.deepEqual(await Promise.all([readyA, readyB]), ["ready", "ready"]);
  const doneA = a.nextLine();
  const doneB = b.nextLine();
  const t0 = Date.now() + 500;
  a.child.stdin.write(`${t0}\n`);
  b.child.stdin.write(`${t0}\n`);
  const [outA, outB] = (await Promise.all([doneA, doneB])).map((l) => JSON.parse(l) as string[]);
  a.child.stdin.end();
  b.child.stdin.end();
  assert.equal(outA.length, trials);
  const both = outA.filter((x, i) => x === "held" && outB[i] === "held").length;
  const neither = outA.filter((x, i) => x !== "held" && outB[i] !== "held").length;
  assert.equal(both, 0, `both held the lock in ${both} of ${trials} trials`);
  assert.equal(neither, 0, `a lock nobody holds was refused in ${neither} of ${trials} trials`);
});

test("temp files of killed writers beside a file are removed; a live writer's are kept", () => {
  const dir = scratchDir();
  const meta = join(dir, "rows.jsonl.meta.json");
  const dead = deadPid();
  for (const n of [`rows.jsonl.meta.json.tmp-${dead}`, `rows.jsonl.lock.tmp-${dead}-ab12cd34`, `rows.jsonl.meta.json.tmp-${process.pid}`, "other.tmp-1"]) writeFileSync(join(dir, n), "x");
  removeDeadTemps(meta);
  removeDeadTemps(join(dir, "rows.jsonl.lock"));
  assert.deepEqual(readdirSync(dir).sort(), ["other.tmp-1", `rows.jsonl.meta.json.tmp-${process.pid}`]);
});
