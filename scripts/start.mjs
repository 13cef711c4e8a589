#!/usr/bin/env node
// `npm start`: the full demo on the embedded default (shop database, shop tasks, the kit's own model).
// Every step is a `t2s` command, so the demo shows exactly what a researcher would type:
//   01 benchmark the base on a holdout slice -> 02 headroom on a train slice and the band ->
//   03 a short GRPO continuation on CPU (the full round on a GPU host: T2S_DEMO=full) ->
//   04 serving check of the adapter through `t2s serve` -> benchmark the adapter -> benchmark the shipped
//   round-1 adapter (data/models/shop-sql-4m-grpo-r1, a full GPU round) on the same holdout slice ->
//   05 paired delta of both against the base, the shipped round's first (its headline table), the live
//   continuation after it -> figures exported as SVG/PNG/PDF -> a summary table in the same order.
// The live continuation is a few CPU steps and is not expected to move the holdout; the shipped round shows
// what a full round does, measured here, on this machine, on the same tasks and seeds as the base.
// Everything lands in reports/<timestamp>/ (notebooks, HTML, figures, tables) and out/demo-<timestamp>/
// (rows files, band, training run). Sizes are chosen to finish in ~15 minutes on 2 CPU cores; override
// with T2S_DEMO_HOLDOUT, T2S_DEMO_TRAIN, T2S_DEMO_STEPS.
import { spawnSync } from "node:child_process";
import { existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { dirname, join, resolve } from "node:path";

const root = process.cwd();
const model = process.env.T2S_DEMO_MODEL ?? "data/models/shop-sql-4m";
const tasks = "data/shop/tasks.jsonl";
const stamp = new Date().toISOString().replace(/[:.]/g, "-").slice(0, 19);
const reportDir = join("reports", stamp);
const outDir = join("out", `demo-${stamp}`);
const full = process.env.T2S_DEMO === "full";
const holdoutLimit = Number(process.env.T2S_DEMO_HOLDOUT ?? (full ? 0 : 120));
const trainLimit = Number(process.env.T2S_DEMO_TRAIN ?? (full ? 0 : 16));
const steps = Number(process.env.T2S_DEMO_STEPS ?? (full ? 30 : 2));
// the shipped round was trained on the kit's own model; another T2S_DEMO_MODEL has no shipped round
const shippedAdapter = "data/models/shop-sql-4m-grpo-r1";
const withShipped = model === "data/models/shop-sql-4m" && existsSync(join(shippedAdapter, "adapter_config.json"));
const started = Date.now();

function t2s(args, what) {
  process.stderr.write(`\n[${elapsed()}] ${what}\n$ t2s ${args.join(" ")}\n`);
  const r = spawnSync(process.execPath, ["bin/t2s.js", ...args], { stdio: ["ignore", "inherit", "inherit"], cwd: root });
  if (r.status !== 0) {
    process.stderr.write(`\nnpm start: step failed (exit ${r.status}): t2s ${args.join(" ")}\n`);
    process.exit(r.status ?? 1);
  }
}

function elapsed() {
  const s = Math.round((Date.now() - started) / 1000);
  return `${Math.floor(s / 60)}m${String(s % 60).padStart(2, "0")}s`;
}

function notebook(name, params) {
  const args = ["notebooks", "run", name, "--out", reportDir];
  for (const [k, v] of Object.entries({ ...params, report_dir: reportDir })) args.push("--param", `${k}=${v}`);
  t2s(args, `notebook ${name}`);
}

if (!existsSync("data/shop/shop.sqlite")) t2s(["db", "build", "shop"], "building the shop database");
if (!existsSync(tasks)) t2s(["tasks", "author", "shop"], "authoring the shop task set");
if (!existsSync(join(model, "config.json"))) {
  process.stderr.write(
    `npm start: the kit's model is missing (${model}/config.json). Rebuild it with \`npx t2s recipe default-model\`\n` +
      `(see docs/default-model.md), or point T2S_DEMO_MODEL at a Hugging Face model folder.\n`,
  );
  process.exit(1);
}
mkdirSync(outDir, { recursive: true });
mkdirSync(reportDir, { recursive: true });

// The demo's slices are the first N tasks of each split in id order: ids are hashes, so this is a seeded
// spread over archetypes and difficulties, the same one on every run (the shipped file is grouped by
// archetype, so its own first N would all be one archetype).
const demoTasks = join(outDir, "tasks.jsonl");
const shopDir = resolve(dirname(tasks));
const spread = readFileSync(tasks, "utf8")
  .split("\n")
  .filter((l) => l.trim() !== "")
  .map((l) => JSON.parse(l))
  .map((t) => ({ ...t, db_path: resolve(shopDir, t.db_path) }))
  .sort((a, b) => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0));
writeFileSync(demoTasks, spread.map((t) => JSON.stringify(t)).join("\n") + "\n");

const baseRows = join(outDir, "base-holdout.jsonl");
const trainRows = join(outDir, "base-train.jsonl");
const tunedRows = join(outDir, "grpo-holdout.jsonl");
const shippedRows = join(outDir, "shipped-r1-holdout.jsonl");
const runDir = join(outDir, "grpo");
const policy = `tfjs:${model}`;

// single style: the default model's card recommends it (data/models/shop-sql-4m/README.md); the tool-style
// model and its rounds are data/models/shop-sql-4m-tool and reports/round-tool.md
process.stderr.write(`npm start: ${model} in single style (one reply per question, graded)\n`);
notebook("01-benchmark", { policy, tasks: demoTasks, style: "single", split: "holdout", limit: holdoutLimit, k: 4, temperature: 0.7, max_tokens: 256, out: baseRows });
notebook("02-headroom", { rows_path: trainRows, policy, tasks: demoTasks, split: "train", limit: trainLimit, k: 8, band_dir: join(outDir, "band") });

const config = {
  model: resolve(model),
  tasks: resolve(demoTasks),
  split: "train",
  band: { rows: resolve(trainRows), lo: 0.1, hi: 0.9 },
  adapter: { r: 8, alpha: 16, targets: ["q_proj", "k_proj", "v_proj", "o_proj"] },
  prompts_per_step: full ? 32 : 2,
  group_size: 8,
  steps,
  loss_type: "dapo",
  mask_truncated: true,
  // ~450-token rows x a 4096-token vocabulary: small micro-batches keep the wasm backend inside its memory
  micro_batch_rows: 4,
  lr: 1e-3,
  sampling: { temperature: 1.0, max_tokens: 256 },
  reward_preset: "shaped",
  seed: 1,
  output_dir: resolve(runDir),
};
const configPath = join(outDir, "grpo-config.json");
writeFileSync(configPath, JSON.stringify(config, null, 2) + "\n");
notebook("03-grpo-round", { config: configPath });
notebook("04-serving-check", { model, tasks: demoTasks, adapter: join(runDir, "adapter"), train_log: join(runDir, "train_log.jsonl"), limit: 6, max_tokens: 256 });

// the same slice, k, temperature, token budget and seeds as 01's base benchmark, so every delta is paired
const holdoutArgs = ["--tasks", demoTasks, "--split", "holdout", ...(holdoutLimit ? ["--limit", String(holdoutLimit)] : []), "--k", "4", "--temperature", "0.7", "--max-tokens", "256"];
t2s(["benchmark", "--policy", `${policy}+${join(runDir, "adapter")}`, ...holdoutArgs, "--out", tunedRows], "benchmark the live continuation's adapter on the same holdout slice");
if (withShipped) t2s(["benchmark", "--policy", `${policy}+${shippedAdapter}`, ...holdoutArgs, "--out", shippedRows], "benchmark the shipped round-1 adapter on the same holdout slice");
const liveLabel = `live continuation (${steps} ${full ? "" : "CPU "}steps)`;
// the summary and notebook 05 lead with the shipped round (lib/report/demo-summary.ts, loaded through tsx as bin/t2s.js does)
const { register } = await import("tsx/esm/api");
register();
const { demoCandidates, deltaNotebookParams, demoSummaryLines } = await import("../lib/report/demo-summary.ts");
const candidates = demoCandidates(
  { label: liveLabel, rows: tunedRows, note: `this run's short GRPO continuation (${steps} step(s) from the base); so few steps are not expected to move the holdout` },
  withShipped ? { label: "shipped round 1", rows: shippedRows, note: `${shippedAdapter}, one full GRPO round (79 steps on a GPU), evaluated here on the same slice and seeds` } : null,
);
notebook("05-paired-delta", deltaNotebookParams(baseRows, candidates));
t2s(["figures", "export", "--report", reportDir, "--format", "svg,png,pdf"], "exporting figures");

// the summary is computed in this process from the rows files
const lines = demoSummaryLines({
  baseRows,
  candidates,
  heading: `demo finished in ${elapsed()} (${full ? "full" : "short CPU"} configuration)`,
  footer: [
    `style:    single (the card's recommendation for ${model}); tool style: data/models/shop-sql-4m-tool + shop-sql-4m-tool-grpo-r1-probe (reports/round-tool.md: at this size the tool does not pay)`,
    `reports:  ${reportDir}/  (executed notebooks 01-05 as .ipynb and .html; figures/ as json, svg, png, pdf; tables/ as csv)`,
    `rows:     ${outDir}/  (base-holdout, base-train, grpo-holdout${withShipped ? ", shipped-r1-holdout" : ""} rows; band/; grpo/ with adapter, train_log.jsonl)`,
  ],
});
process.stdout.write(lines.join("\n") + "\n");
writeFileSync(join(reportDir, "summary.txt"), lines.join("\n") + "\n");
