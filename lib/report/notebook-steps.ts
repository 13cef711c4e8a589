/**
 * The steps the research notebooks run, so cells stay one call each: run or resume a benchmark (or fall
 * back to a labelled rows file), a browsable failure sample with re-executed results, band selection with
 * what each rule drops, and a training run whose curves redraw while it goes.
 */
import { existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { dirname, isAbsolute, join, resolve } from "node:path";
import * as aq from "arquero";
import { ExecutorPool } from "../db/pool.js";
import { T2sError } from "../core/errors.js";
import { kitPath } from "../core/paths.js";
import { readTasks, writeTasks } from "../tasks/io.js";
import type { Task } from "../tasks/types.js";
import { checkBand, inBand, passRates } from "../tasks/select.js";
import { commandText, runT2s, startT2s } from "./commands.js";
import { browseHtml, failures, sample } from "./failures.js";
import { liveOutput } from "./live.js";
import { namedFigureHtml } from "./notebook-report.js";
import { readRows, type ReportRow } from "./rows.js";
import type { Table } from "./tables.js";
import { readTrainLog, trainingCurvesFigure, trainProgressLine, type TrainRecord } from "./training.js";
import { SAMPLES_PER_TASK } from "../core/defaults.js";

/** The kit's own model and task set: what the notebooks use when given no parameters. */
export const DEFAULT_MODEL_DIR = "data/models/shop-sql-4m";
export const DEFAULT_POLICY = `tfjs:${DEFAULT_MODEL_DIR}`;
export const DEFAULT_TASKS = "data/shop/tasks.jsonl";
export const DEFAULT_BENCHMARK_ROWS = "out/benchmark/shop-sql-4m.jsonl";

function abs(p: string): string {
  return isAbsolute(p) ? p : kitPath(p);
}

export interface BenchmarkParams {
  policy: string;
  tasks?: string;
  out: string;
  split?: string;
  limit?: number;
  k?: number;
  temperature?: number;
  /** Tokens per turn (the benchmark's default when unset). */
  maxTokens?: number;
  concurrency?: number;
  seed?: number;
  style?: string;
  /** A rows file to read, clearly labelled, when the policy's model is not available. */
  fallbackRows?: string;
}

export interface BenchmarkStep {
  rows: ReportRow[];
  /** "benchmark": rows this run produced or resumed; "fallback": rows read from a given file instead. */
  source: "benchmark" | "fallback";
  label: string;
  rowsPath: string;
  command: string | null;
}

/** The model folder a "tfjs:<dir>[+adapter]" policy needs, or null for other policies. */
export function policyModelDir(policy: string): string | null {
  if (!policy.startsWith("tfjs:")) return null;
  return policy.slice(5).split("+")[0];
}

/**
 * Runs (or resumes) `t2s benchmark` for the policy and reads its rows. When the policy's local model is
 * missing it reads `fallbackRows` instead, labelled as such, or throws a message saying what to do:
 * results are never made up.
 */
export async function benchmarkStep(p: BenchmarkParams): Promise<BenchmarkStep> {
  const modelDir = policyModelDir(p.policy);
  if (modelDir && !existsSync(abs(modelDir))) {
    if (p.fallbackRows) {
      const path = abs(p.fallbackRows);
      return { rows: readRows(path), source: "fallback", label: `FALLBACK: rows read from ${p.fallbackRows} (model ${modelDir} not found; no benchmark was run)`, rowsPath: path, command: null };
    }
    throw new T2sError("no_model",
      `the model folder ${modelDir} does not exist, so policy '${p.policy}' cannot run. Build or fetch the model first, ` +
      `or run this notebook with --param policy=openai:<model>@<url> (any OpenAI-compatible server), ` +
      `or analyse an existing rows file instead (01-benchmark: --param fallback_rows=<rows.jsonl>; 02-headroom: --param rows_path=<rows.jsonl>).`);
  }
  const out = abs(p.out);
  mkdirSync(dirname(out), { recursive: true });
  const args = ["benchmark", "--policy", p.policy, "--tasks", p.tasks ?? DEFAULT_TASKS, "--out", out, "--k", String(p.k ?? SAMPLES_PER_TASK)];
  if (p.split) args.push("--split", p.split);
  if (p.limit) args.push("--limit", String(p.limit));
  if (p.temperature !== undefined) args.push("--temperature", String(p.temperature));
  if (p.maxTokens) args.push("--max-tokens", String(p.maxTokens));
  if (p.concurrency) args.push("--concurrency", String(p.concurrency));
  if (p.seed !== undefined) args.push("--seed", String(p.seed));
  if (p.style) args.push("--style", p.style);
  const live = liveOutput();
  live.text(`running: ${commandText(args)}`);
  await runT2s(args, { onLine: (line) => live.text(line) });
  const rows = readRows(out);
  live.text(`done: ${rows.length} rows in ${p.out}`);
  return { rows, source: "benchmark", label: p.policy, rowsPath: out, command: commandText(args) };
}

/** Returns the tasks of a task file by id. */
export function taskMap(path: string = DEFAULT_TASKS): Map<string, Task> {
  return new Map(readTasks(abs(path)).map((t) => [t.id, t]));
}

/**
 * Returns HTML for a seeded sample of `n` failures: each one collapsible, opening to its transcript, tool
 * calls and (with execute) the final and gold SQL re-executed side by side through a fresh executor pool.
 */
export async function failureSampleHtml(rows: readonly ReportRow[], opts: { tasks?: string; n?: number; seed?: number; execute?: boolean } = {}): Promise<string> {
  const picked = sample(failures(rows), opts.n ?? 6, opts.seed ?? 0);
  const tasks = existsSync(abs(opts.tasks ?? DEFAULT_TASKS)) ? taskMap(opts.tasks) : undefined;
  if (!opts.execute || !tasks) return browseHtml(picked, { tasks });
  const pool = new ExecutorPool({ workers: 1 });
  try {
    return await browseHtml(picked, { tasks, executor: pool });
  } finally {
    await pool.close();
  }
}

export interface BandSelection {
  lo: number;
  hi: number;
  /** Task ids in the band, sorted. */
  taskIds: string[];
  /** What each rule keeps or drops: rule, tasks, share. */
  table: Table;
  /** Every task's rate and whether it is kept. */
  tasks: Table;
}

/**
 * Selects the training band exactly as the trainer does (pooled pass rate in [lo, hi], lib/tasks/select.ts)
 * and says why each other task is dropped: always right (rate 1), always wrong (rate 0), or out of band.
 */
export function bandSelection(rows: readonly ReportRow[], lo: number, hi: number): BandSelection {
  checkBand(lo, hi);
  const rates = [...passRates(rows).values()].sort((a, b) => (a.task_id < b.task_id ? -1 : 1));
  const why = (r: number) => (inBand(r, lo, hi) ? "kept (in band)" : r === 1 ? "dropped: always right" : r === 0 ? "dropped: always wrong" : "dropped: out of band");
  const records = rates.map((r) => ({ task_id: r.task_id, rows: r.rows, correct: r.correct, rate: r.rate, rule: why(r.rate) }));
  const rules = ["kept (in band)", "dropped: always right", "dropped: always wrong", "dropped: out of band"];
  const table = aq.from(rules.map((rule) => {
    const n = records.filter((x) => x.rule === rule).length;
    return { rule, tasks: n, share: records.length ? n / records.length : 0 };
  }));
  return { lo, hi, taskIds: records.filter((x) => x.rule === "kept (in band)").map((x) => x.task_id), table, tasks: aq.from(records) };
}

/**
 * Writes the band: `<dir>/band_ids.txt` (one id a line) and `<dir>/band.json` with the rows file, lo, hi
 * and the ids, plus the training-config snippet that selects the same tasks. Returns the paths and snippet.
 */
export function writeBand(dir: string, rowsPath: string, band: BandSelection): { ids: string; json: string; configSnippet: string } {
  const folder = abs(dir);
  mkdirSync(folder, { recursive: true });
  const ids = join(folder, "band_ids.txt");
  const json = join(folder, "band.json");
  writeFileSync(ids, band.taskIds.join("\n") + (band.taskIds.length ? "\n" : ""));
  const snippet = JSON.stringify({ band: { rows: resolve(rowsPath), lo: band.lo, hi: band.hi } });
  writeFileSync(json, JSON.stringify({ rows: resolve(rowsPath), lo: band.lo, hi: band.hi, tasks: band.taskIds.length, task_ids: band.taskIds }, null, 2) + "\n");
  return { ids, json, configSnippet: snippet };
}

/** The facts of a training config a notebook shows before running it (relative paths resolved to the config's folder). */
export function trainConfigFacts(configPath: string): { path: string; model: string; output_dir: string; steps: number | null; raw: Record<string, unknown> } {
  const path = abs(configPath);
  if (!existsSync(path)) throw new T2sError("not_found", `training config ${configPath} does not exist (see docs/training.md for the fields)`);
  let raw: Record<string, unknown>;
  try {
    raw = JSON.parse(readFileSync(path, "utf8")) as Record<string, unknown>;
  } catch (e) {
    throw new T2sError("bad_config", `${configPath}: not JSON (${(e as Error).message})`);
  }
  const rel = (v: unknown) => (typeof v === "string" ? (isAbsolute(v) ? v : resolve(dirname(path), v)) : "");
  return { path, model: rel(raw.model), output_dir: rel(raw.output_dir), steps: typeof raw.steps === "number" ? raw.steps : null, raw };
}

export interface TrainStep {
  log: TrainRecord[];
  logPath: string;
  summary: Record<string, unknown> | null;
  command: string;
}

/**
 * Runs `t2s train <mode> --config FILE` (resuming when asked) and redraws the training curves in place
 * from its train_log.jsonl every `refreshMs` while it runs; returns the final log and the run summary.
 */
export async function trainStep(configPath: string, opts: { mode?: "grpo" | "sft"; resume?: boolean; refreshMs?: number; name?: string; backend?: string } = {}): Promise<TrainStep> {
  const facts = trainConfigFacts(configPath);
  if (!existsSync(facts.model)) {
    throw new T2sError("no_model", `the config's model folder ${facts.model} does not exist; build or fetch the model first, or pass --param config=<a config whose model exists>`);
  }
  const args = ["train", opts.mode ?? "grpo", "--config", facts.path, "--json"];
  if (opts.resume) args.push("--resume");
  if (opts.backend) args.push("--backend", opts.backend);
  const logPath = join(facts.output_dir, "train_log.jsonl");
  const status = liveOutput();
  const curves = liveOutput();
  let lastLine = "";
  const redraw = () => {
    if (!existsSync(logPath)) return;
    const log = readTrainLog(logPath);
    if (log.length === 0) return;
    curves.html(namedFigureHtml(`${opts.name ?? "training-curves"}-live`, trainingCurvesFigure(log, `Training curves (live, ${log.length} steps)`)));
    status.text(`${trainProgressLine(log, facts.steps ?? undefined)}${lastLine ? `\n${lastLine}` : ""}`);
  };
  const timer = setInterval(redraw, opts.refreshMs ?? 5000);
  let result;
  try {
    result = await runT2s(args, { onLine: (l) => { lastLine = l; } });
  } finally {
    clearInterval(timer);
  }
  redraw();
  let summary: Record<string, unknown> | null = null;
  try {
    summary = JSON.parse(result.stdout) as Record<string, unknown>;
  } catch {
    summary = null;
  }
  return { log: existsSync(logPath) ? readTrainLog(logPath) : [], logPath, summary, command: commandText(args) };
}

/** Returns the holdout checkpoints of a train log (records with eval_* fields) as a table: step, pass@1, reward, rows. */
export function holdoutCheckpoints(log: readonly TrainRecord[]): Table {
  return aq.from(log.filter((r) => r.eval_pass1 !== undefined).map((r) => ({ step: (r.step ?? 0) + 1, holdout_pass1: r.eval_pass1, holdout_reward: r.eval_reward ?? null, rows: r.eval_rows ?? null })));
}

/** Returns an HTML banner saying where the rows came from; a fallback file is marked in red so it is never mistaken for a fresh run. */
export function benchmarkBanner(step: BenchmarkStep): string {
  const esc = (s: string) => s.replace(/&/g, "&amp;").replace(/</g, "&lt;");
  const style = step.source === "fallback" ? "border:2px solid #d62728;background:#fdecea" : "border:1px solid #2ca02c;background:#eef7ee";
  const cmd = step.command ? `<div><code>${esc(step.command)}</code></div>` : "";
  const episodeStyle = step.rows[0]?.style ? ` in ${esc(String(step.rows[0].style))} style` : "";
  return `<div class="t2s-source" data-source="${step.source}" style="${style};padding:6px 10px;border-radius:4px"><strong>${esc(step.label)}</strong> — ${step.rows.length} rows${episodeStyle} from <code>${esc(step.rowsPath)}</code>${cmd}</div>`;
}

export interface ServingParams {
  model: string;
  adapter: string;
  /**
   * An OpenAI-compatible server already serving the model (vLLM, SGLang, ...; a comma-separated list for
   * a fleet): scored as it is, instead of starting `t2s serve` on the local folders.
   */
  endpoint?: string;
  /** Model name the endpoint serves the adapter under (default "trained"). */
  servedAdapter?: string;
  /** Model name the endpoint serves the base under (default "base"; "" scores no base rows). */
  servedBase?: string;
  tasks?: string;
  /**
   * Only these tasks of `tasks` (the trainer's, or a seeded sample of them: lib/report/serving.ts
   * servedTasks); split and limit are then not applied.
   */
  taskIds?: readonly string[];
  split?: string;
  limit?: number;
  k?: number;
  outDir: string;
  style?: string;
  maxTokens?: number;
  /** tfjs backend for the server (default: its own choice). */
  backend?: string;
  /** Time allowed for the server to load (default 10 min). */
  readyTimeoutMs?: number;
}

export interface ServingStep {
  url: string;
  adapterRows: ReportRow[];
  baseRows: ReportRow[];
  commands: string[];
}

/**
 * Starts `t2s serve` with the base model (served as "base") and the adapter (served as "trained"),
 * scores the same prompts through HTTP with both at temperature 0, stops the server, and returns the rows.
 */
export async function servingStep(p: ServingParams): Promise<ServingStep> {
  if (p.endpoint) return scoreServed(p, p.endpoint.replace(/\/+$/, ""), [], async () => undefined);
  for (const [what, dir] of [["model", p.model], ["adapter", p.adapter]] as const) {
    if (!existsSync(abs(dir))) throw new T2sError("not_found", `the ${what} folder ${dir} does not exist; train first (03-grpo-round) or pass --param ${what}=<dir>, or check existing rows files with --param adapter_rows=... --param base_rows=...`);
  }
  const serveArgs = ["serve", "--model", abs(p.model), "--name", "base", "--adapter", `trained=${abs(p.adapter)}`, "--port", "0"];
  if (p.backend) serveArgs.push("--backend", p.backend);
  const live = liveOutput();
  live.text(`starting: ${commandText(serveArgs)}`);
  const server = await startT2sServer(serveArgs, p.readyTimeoutMs ?? 600_000, (l) => live.text(l));
  return scoreServed({ ...p, servedAdapter: "trained", servedBase: "base" }, server.url, [commandText(serveArgs)], server.stop);
}

/** Scores the same prompts with the served adapter and base at temperature 0, then stops the server. */
async function scoreServed(p: ServingParams, url: string, commands: string[], stop: () => Promise<void>): Promise<ServingStep> {
  // a fresh rows file per session: the server's port, part of the policy spec, changes every time
  const stamp = new Date().toISOString().replace(/[:.]/g, "-");
  try {
    const chosen = p.taskIds ? chosenTasksFile(p.tasks ?? DEFAULT_TASKS, p.taskIds, join(p.outDir, `served-tasks-${stamp}.jsonl`)) : null;
    const score = async (name: string) => {
      const step = await benchmarkStep({
        policy: `openai:${name}@${url}`, tasks: chosen ?? p.tasks, split: chosen ? undefined : p.split ?? "train", limit: chosen ? undefined : p.limit ?? 16, k: p.k ?? 1,
        temperature: 0, maxTokens: p.maxTokens, out: join(p.outDir, `served-${name.replace(/[^A-Za-z0-9_.-]/g, "_")}-${stamp}.jsonl`), style: p.style,
      });
      if (step.command) commands.push(step.command);
      return step.rows;
    };
    const adapterRows = await score(p.servedAdapter || "trained");
    const baseName = p.servedBase ?? "base";
    const baseRows = baseName ? await score(baseName) : [];
    return { url, adapterRows, baseRows, commands };
  } finally {
    await stop();
  }
}

/** Writes the tasks of `tasksFile` named by `ids` to `out` and returns it; an id the file lacks is an error. */
function chosenTasksFile(tasksFile: string, ids: readonly string[], out: string): string {
  const byId = new Map(readTasks(abs(tasksFile)).map((t) => [t.id, t]));
  const missing = ids.filter((id) => !byId.has(id));
  if (missing.length) throw new T2sError("unknown_task", `${tasksFile} has no task ${missing.slice(0, 3).join(", ")}${missing.length > 3 ? ` (and ${missing.length - 3} more)` : ""} of the ${ids.length} to score: pass the task file the trainer used`);
  writeTasks(abs(out), ids.map((id) => byId.get(id)!));
  return abs(out);
}

async function startT2sServer(args: string[], timeoutMs: number, onLine: (l: string) => void): Promise<{ url: string; stop(): Promise<void> }> {
  const bg = await startT2s(args, /serving .* at (\S+\/v1)/, { timeoutMs, onLine });
  return { url: bg.match[1], stop: bg.stop };
}
