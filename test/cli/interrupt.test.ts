/**
 * Ctrl-C during benchmark, train and tasks augment: exit 130 with one line saying what was kept and the
 * exact command that continues; running that command continues without losing anything.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { spawn, type ChildProcess } from "node:child_process";
import { existsSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { runCli, scratchDir, t2sBin } from "../helpers.js";
import { startFakeOpenAI, scriptedResponder, type FakeRequest } from "../support/fake-openai.js";
import { fenced, makeItemsDb, writeItemTasks, ITEM_TASKS } from "../support/fixtures.js";
import { tinyTrainingWorld } from "../train/tiny-world.js";
import { checkpointStep, latestCheckpoint } from "../../lib/train/checkpoint.js";

/** Starts `t2s ...args`; `ready(stderrSoFar)` says when to press Ctrl-C (null: on `when` resolving). */
function interruptWhen(args: string[], opts: { env?: Record<string, string>; stderrReady?: (stderr: string) => boolean; when?: Promise<void> }): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve, reject) => {
    const child: ChildProcess = spawn(process.execPath, [t2sBin, ...args], { stdio: ["ignore", "pipe", "pipe"], env: { ...process.env, ...opts.env } });
    let stdout = "";
    let stderr = "";
    let sent = false;
    const press = () => {
      if (!sent) child.kill("SIGINT");
      sent = true;
    };
    child.stdout!.on("data", (d) => (stdout += d));
    child.stderr!.on("data", (d) => {
      stderr += d;
      if (opts.stderrReady?.(stderr)) press();
    });
    void opts.when?.then(press);
    child.on("error", reject);
    child.on("close", (code) => resolve({ code, stdout, stderr }));
  });
}

/** The command an interruption line tells the user to run, as arguments after `t2s`. */
function resumeArgs(line: string): string[] {
  const m = /: t2s (.*)$/.exec(line.trim());
  assert.ok(m, line);
  return m[1].split(" ").map((w) => w.replace(/^'(.*)'$/, "$1"));
}

test("Ctrl-C during benchmark: exit 130, one line with the rows kept and the command that resumes; that command finishes the run", async () => {
  const dir = scratchDir();
  makeItemsDb(dir);
  const tasks = writeItemTasks(dir);
  const out = join(dir, "rows.jsonl");
  const answer = scriptedResponder([{ match: "", turns: [{ content: fenced("SELECT count(*) FROM items") }] }]);
  let hang = true;
  let arrived!: () => void;
  const stuck = new Promise<void>((r) => (arrived = r));
  // one episode at a time, so three rows are on disk when the fourth task's request hangs
  const server = await startFakeOpenAI((req: FakeRequest) => {
    if (hang && req.question === ITEM_TASKS[3].question) {
      arrived();
      return { hang: true };
    }
    return answer(req);
  });
  try {
    const args = ["benchmark", "--policy", `openai:fake@${server.baseUrl}`, "--tasks", tasks, "--out", out, "--k", "1", "--concurrency", "1", "--workers", "1", "--quiet"];
    const r = await interruptWhen(args, { when: stuck });
    assert.equal(r.code, 130);
    assert.equal(r.stdout, "");
    const lines = r.stderr.trim().split("\n");
    assert.equal(lines.length, 1, r.stderr);
    assert.match(lines[0], new RegExp(`^interrupted: ${out.replace(/[.*+?^${}()|[\]\\/]/g, "\\$&")} keeps 3 row\\(s\\), one per finished episode; the same command resumes the run: t2s benchmark `));
    assert.equal(readFileSync(out, "utf8").trim().split("\n").length, 3);
    assert.deepEqual(resumeArgs(lines[0]), args);
    hang = false;
    const again = await runCli(resumeArgs(lines[0]));
    assert.equal(again.code, 0, again.stderr);
    assert.match(again.stdout, /rows 6\/6 \(3 resumed\)/);
  } finally {
    await server.close();
  }
});

test("Ctrl-C during train: exit 130, one line naming the checkpoint kept and the --resume command; that command goes on from it", async () => {
  const dir = tinyTrainingWorld("t2s-interrupt-");
  const config = join(dir, "sft.json");
  writeFileSync(config, JSON.stringify({ model: "model", tasks: "tasks.jsonl", output_dir: "out", seed: 1, batch_size: 2, epochs: 1000, lr: 0.01, checkpoint_every: 1, adapter: { r: 2, targets: ["q_proj"] } }));
  const env = { T2S_BACKEND: "wasm" };
  const r = await interruptWhen(["train", "sft", "--config", config], { env, stderrReady: (s) => /step 3\//.test(s) });
  assert.equal(r.code, 130);
  const said = r.stderr.trim().split("\n");
  assert.equal(said.filter((l) => l.startsWith("interrupted:")).length, 1, r.stderr);
  const line = said[said.length - 1];
  const last = latestCheckpoint(join(dir, "out"));
  assert.ok(last, "a checkpoint was written before step 3 ended");
  const step = checkpointStep(last);
  assert.match(line, new RegExp(`^interrupted: .*out keeps the checkpoint after step ${step} \\(the steps after it run again\\); continue with: t2s train sft --config .* --resume$`));
  const resumed = await interruptWhen(resumeArgs(line), { env, stderrReady: (s) => /step \d+\//.test(s) });
  assert.match(resumed.stderr, new RegExp(`resuming after step ${step}`));
  assert.equal(resumed.code, 130);
});

test("Ctrl-C during tasks augment: exit 130, one line saying nothing was written and the command to run again", async () => {
  const dir = scratchDir();
  const out = join(dir, "extra.jsonl");
  const r = await interruptWhen(["tasks", "augment", "--seed", "7", "--attempts", "1500", "--out", out, "--workers", "1"], { stderrReady: (s) => /\[\w+\] \d+\/\d+/.test(s) });
  assert.equal(r.code, 130);
  const lines = r.stderr.trim().split("\n").filter((l) => !/^\[\w+\] \d+\/\d+$/.test(l));
  assert.equal(lines.length, 1, r.stderr);
  assert.match(lines[0], /^interrupted: nothing written: .*extra\.jsonl is written whole at the end and is as it was; the same seed drafts the same tasks again with: t2s tasks augment --seed 7 --attempts 1500 --out .*extra\.jsonl --workers 1$/);
  assert.ok(!existsSync(out));
});
