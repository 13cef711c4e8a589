import { test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync, mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { runCli, t2sBin } from "../helpers.js";
import { canLimitFileSize, runWithFileSizeLimit } from "../support/file-size-limit.js";
import { tinyTrainingWorld } from "./tiny-world.js";

const LIMIT_KIB = 64; // above every other file of the run (the largest, the optimizer state, is ~9 KB)

test("a train log append that fails midway leaves the log as it was; the run stops with write_failed and runs again cleanly", { skip: (await canLimitFileSize()) ? false : "needs bash's ulimit -f" }, async () => {
  const dir = tinyTrainingWorld("t2s-train-log-");
  const config = join(dir, "sft.json");
  writeFileSync(config, JSON.stringify({ model: "model", tasks: "tasks.jsonl", output_dir: "out", seed: 1, batch_size: 2, epochs: 2, lr: 0.01, adapter: { r: 2, targets: ["q_proj"] } }));
  // an earlier event record (kept by the run: it happened at step 0) fills the log to 100 bytes under the
  // size limit, so the first step record is written in part and then fails, as on a disk that fills up
  mkdirSync(join(dir, "out"));
  const event = { event: "note", at_step: 0, text: "" };
  const size = LIMIT_KIB * 1024 - 100;
  event.text = "x".repeat(size - JSON.stringify(event).length - 1);
  const before = JSON.stringify(event) + "\n";
  assert.equal(before.length, size);
  const log = join(dir, "out", "train_log.jsonl");
  writeFileSync(log, before);

  const env = { T2S_BACKEND: "wasm" };
  const r = await runWithFileSizeLimit(LIMIT_KIB, process.execPath, [t2sBin, "train", "sft", "--config", config], { env });
  assert.equal(readFileSync(log, "utf8"), before, "the part of the record written before the failure is cut off");
  assert.equal(r.code, 1, r.stderr);
  assert.match(r.stderr, /^error \[write_failed\]: .*train_log\.jsonl: could not append a log record \(EFBIG/m);
  assert.doesNotMatch(r.stderr, /\n\s+at /, "no stack trace");

  const again = await runCli(["train", "sft", "--config", config, "--json"], { env });
  assert.equal(again.code, 0, again.stderr);
  const records = readFileSync(log, "utf8").trim().split("\n").map((l) => JSON.parse(l) as Record<string, unknown>);
  assert.deepEqual(records.map((x) => x.event ?? x.step), ["note", 0, 1], "every line is a whole record");
  assert.ok((records[2].wasm_heap_gb as number) > 0, "on wasm each step records the heap's size");
});
