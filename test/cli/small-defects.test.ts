/** Small command-line defects, each with its test: exit codes, messages that say what is wrong, help texts. */
import { test } from "node:test";
import assert from "node:assert/strict";
import { existsSync, mkdirSync, readdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import type { Command } from "commander";
import { runCli, scratchDir } from "../helpers.js";
import { buildProgram } from "../../lib/cli/main.js";
import { policyKinds } from "../../lib/policy/spec.js";
import { makeItemsDb, writeItemTasks } from "../support/fixtures.js";
import { fixtureDir } from "../model/fixtures.js";
import { tinyTrainingWorld } from "../train/tiny-world.js";

const oneLine = (stderr: string) => assert.equal(stderr.trim().split("\n").length, 1, stderr);

test("--backend gpu is a usage error: exit 2, one line", async () => {
  const r = await runCli(["logits", "--model", fixtureDir("qwen2"), "--text", "a", "--backend", "gpu"]);
  assert.equal(r.code, 2);
  assert.match(r.stderr, /^error \[usage\]: unknown backend 'gpu': use auto, webgpu, tensorflow, wasm, cpu/);
  oneLine(r.stderr);
});

test("a misspelt --policy scheme lists every scheme, tfjs: among them", async () => {
  assert.deepEqual(policyKinds().sort(), ["openai", "scripted", "tfjs"]);
  const dir = scratchDir();
  makeItemsDb(dir);
  const r = await runCli(["benchmark", "--policy", "opnai:m@http://127.0.0.1:9/v1", "--tasks", writeItemTasks(dir), "--out", join(dir, "rows.jsonl")]);
  assert.equal(r.code, 2);
  assert.match(r.stderr, /^error \[usage\]: unknown policy 'opnai:m@http:\/\/127\.0\.0\.1:9\/v1': use one of openai:\.\.\., scripted:\.\.\., tfjs:\.\.\. /);
  oneLine(r.stderr);
});

test("--out naming a folder is one clear usage error, and nothing is written beside it", async () => {
  const dir = scratchDir();
  makeItemsDb(dir);
  const tasks = writeItemTasks(dir);
  const folder = join(dir, "a-folder");
  mkdirSync(folder);
  const runs = [
    { args: ["benchmark", "--policy", "scripted:none.json", "--tasks", tasks, "--out", folder], example: "rows.jsonl" },
    { args: ["tasks", "augment", "--attempts", "1", "--out", folder], example: "extra.jsonl" },
    { args: ["db", "build", "shop", "--out", folder], example: "shop.sqlite" },
  ];
  for (const { args, example } of runs) {
    const r = await runCli(args);
    assert.equal(r.code, 2, `${args.join(" ")}: ${r.stderr}`);
    assert.equal(r.stderr, `error [usage]: --out ${folder} is a folder; give the path of the file to write (e.g. ${join(folder, example)}) (run with --help for usage)\n`);
  }
  assert.deepEqual(readdirSync(dir).sort(), ["a-folder", "items.sqlite", "tasks.jsonl"]);
  assert.deepEqual(readdirSync(folder), []);
});

test("with --quiet the no_tasks error still says the tasks' databases are missing", async () => {
  const dir = scratchDir();
  const tasks = writeItemTasks(dir); // no items.sqlite beside it
  const script = join(dir, "script.json");
  writeFileSync(script, "[]");
  const r = await runCli(["benchmark", "--policy", `scripted:${script}`, "--tasks", tasks, "--out", join(dir, "rows.jsonl"), "--quiet"]);
  assert.equal(r.code, 1);
  const last = r.stderr.trim().split("\n").at(-1)!;
  assert.match(last, /^error \[no_tasks\]: no tasks to run of .*tasks\.jsonl; skipped 6 tasks of 1 missing database .* items: 6 tasks \(no file/);
});

test("a GRPO config whose band rows file is missing says what the file is and what makes it", async () => {
  const dir = tinyTrainingWorld("t2s-band-");
  const config = join(dir, "grpo.json");
  writeFileSync(config, JSON.stringify({ model: "model", tasks: "tasks.jsonl", output_dir: "out", steps: 1, band: { rows: "base-train.jsonl", lo: 0.1, hi: 0.9 } }));
  const r = await runCli(["train", "grpo", "--config", config]);
  assert.equal(r.code, 1);
  assert.match(r.stderr, /^error \[no_band_rows\]: .*base-train\.jsonl does not exist: it is the band rows of .*grpo\.json \(band\.rows\).*Notebook 02-headroom writes it .*t2s benchmark .*--split train .*--out .*base-train\.jsonl/);
  oneLine(r.stderr);
  assert.ok(!existsSync(join(dir, "out")), "nothing started");
});

test("no help text states its default twice", async () => {
  const program = await buildProgram();
  const twice: string[] = [];
  const visit = (cmd: Command, path: string) => {
    for (const o of cmd.options) if (o.defaultValue !== undefined && /\(default\b/.test(o.description)) twice.push(`${path} ${o.flags}: ${o.description}`);
    for (const sub of cmd.commands) visit(sub, `${path} ${sub.name()}`);
  };
  visit(program, "t2s");
  assert.deepEqual(twice, []);
});

test("db schema --tables with a name the database lacks is an error naming it", async () => {
  const dir = scratchDir();
  const db = makeItemsDb(dir);
  const r = await runCli(["db", "schema", "--db", db, "--tables", "items,itemz"]);
  assert.equal(r.code, 1);
  assert.equal(r.stdout, "");
  assert.match(r.stderr, /^error \[unknown_table\]: no table or view named 'itemz' in .*items\.sqlite; it has items\n$/);
  const ok = await runCli(["db", "schema", "--db", db, "--tables", "ITEMS"]);
  assert.equal(ok.code, 0, ok.stderr);
  assert.match(ok.stdout, /^CREATE TABLE items/);
});

test("a policy refusal that escapes a command is one error line with its reason as the code", async () => {
  const { reportError } = await import("../../lib/cli/main.js");
  const { PolicyError } = await import("../../lib/policy/types.js");
  const written: string[] = [];
  const write = process.stderr.write;
  process.stderr.write = ((s: string) => { written.push(s); return true; }) as typeof process.stderr.write;
  let code: number;
  try {
    code = reportError(new PolicyError("context_exceeded", "the prompt has 3000 tokens\nand the model takes 2048", { setup: true }));
  } finally {
    process.stderr.write = write;
  }
  assert.equal(code, 1);
  assert.deepEqual(written, ["error [policy_context_exceeded]: the prompt has 3000 tokens and the model takes 2048\n"]);
});
