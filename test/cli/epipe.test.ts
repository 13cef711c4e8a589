/**
 * A reader that closes stdout early (`t2s ... | head -3`) ends the command quietly with exit 0, as Unix
 * tools do: no `error [epipe]`, and nothing written to files is lost. The reader here closes its end of
 * the pipe before the command writes anything, so every write meets a closed pipe.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { scratchDir, t2sBin } from "../helpers.js";
import { fenced, makeItemsDb, writeItemTasks, ITEM_TASKS } from "../support/fixtures.js";
import { fixtureDir } from "../model/fixtures.js";

/** Runs `t2s ...args` with stdout's reader gone from the start; returns the exit code and stderr. */
function runClosedStdout(args: string[], input = ""): Promise<{ code: number | null; stderr: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [t2sBin, ...args], { stdio: ["pipe", "pipe", "pipe"], env: { ...process.env, T2S_BACKEND: "cpu" } });
    child.stdout.destroy();
    let stderr = "";
    child.stderr.on("data", (d) => (stderr += d));
    child.on("error", reject);
    child.on("close", (code) => resolve({ code, stderr }));
    child.stdin.on("error", () => undefined); // the command may stop before reading all its input
    child.stdin.end(input);
  });
}

test("benchmark into a closed pipe: exit 0, no error, every row on disk", async () => {
  const dir = scratchDir();
  makeItemsDb(dir);
  const tasks = writeItemTasks(dir);
  const script = join(dir, "script.json");
  writeFileSync(script, JSON.stringify([{ replies: [fenced("SELECT count(*) FROM items")] }]));
  const out = join(dir, "rows.jsonl");
  const r = await runClosedStdout(["benchmark", "--policy", `scripted:${script}`, "--tasks", tasks, "--out", out, "--k", "2", "--workers", "1", "--quiet"]);
  assert.equal(r.stderr, "");
  assert.equal(r.code, 0);
  assert.equal(readFileSync(out, "utf8").trim().split("\n").length, ITEM_TASKS.length * 2);
});

test("grade --jsonl into a closed pipe stops quietly with exit 0", async () => {
  const dir = scratchDir();
  const db = makeItemsDb(dir);
  const line = JSON.stringify({ db, gold: "SELECT count(*) FROM items", pred: fenced("SELECT count(*) FROM items") });
  const r = await runClosedStdout(["grade", "--jsonl"], Array.from({ length: 200 }, () => line).join("\n") + "\n");
  assert.equal(r.stderr, "");
  assert.equal(r.code, 0);
});

test("logits --json into a closed pipe: exit 0, no error", async () => {
  const r = await runClosedStdout(["logits", "--model", fixtureDir("qwen2"), "--text", "SELECT", "--json"]);
  assert.equal(r.stderr, "");
  assert.equal(r.code, 0);
});
