/** `t2s tasks ...`: verify, author, augment, split, summarise and export task sets. */
import type { Command } from "commander";
import { existsSync } from "node:fs";
import { join, resolve } from "node:path";
import { UsageError } from "../core/errors.js";
import { schemaDdl } from "../db/schema.js";
import { defaultShopPath } from "../db/shop/build.js";
import { notesFor } from "../db/notes.js";
import { openingMessages, type PromptConfig } from "../episode/prompt.js";
import { sqlToolSpec } from "../episode/tools.js";
import { MAX_TOOL_CALLS, TOOL_ROWS } from "../core/defaults.js";
import { kitPath } from "../core/paths.js";
import { createExecutorPool } from "../db/direct-executor.js";
import { EXPORT_FORMATS, exportTasks, type ExportFormat } from "../tasks/export.js";
import { readTasks, writeTasks } from "../tasks/io.js";
import { describeMissing, loadTaskSource, SOURCE_FORMATS, type LoadOptions, type SourceFormat } from "../tasks/loaders.js";
import { augmentTrainingTasks } from "../tasks/shop/augment.js";
import { commandLine, onInterrupt } from "./interrupt.js";
import { DEFAULT_AUTHOR_SEED } from "../tasks/shop/author.js";
import { writeShopTaskSet } from "../tasks/shop/ship.js";
import { HOLDOUT_FRACTION } from "../tasks/split.js";
import { taskStats } from "../tasks/stats.js";
import { parseTeacherSpec, runTeacher } from "../tasks/teacher.js";
import type { Task } from "../tasks/types.js";
import { VERIFY_MODES, verifyTasks, type VerifyMode } from "../tasks/verify.js";
import { DIALECTS } from "../db/dialect.js";
import { dialectOption, intOption, oneOf, outFile, printJson } from "./options.js";

interface SourceOpts {
  format?: string;
  file?: string;
  dbRoot?: string;
  strict?: boolean;
}

function addSourceOptions(cmd: Command): Command {
  return cmd
    .argument("<source>", "task file (kit jsonl, BIRD-Platinum jsonl) or folder (Spider, BIRD)")
    .option("--format <name>", `source format: ${SOURCE_FORMATS.join(", ")} (default: detected)`)
    .option("--file <name>", "records file inside a Spider/BIRD folder (default dev.json)")
    .option("--db-root <dir>", "BIRD-Platinum: folder holding <db_id>/<db_id>.sqlite")
    .option("--strict", "a task whose database file is missing is an error (default: skip it, listing the missing databases)");
}

function load(source: string, opts: SourceOpts): Task[] {
  if (opts.format && !SOURCE_FORMATS.includes(opts.format as SourceFormat)) {
    throw new UsageError(`--format must be one of ${SOURCE_FORMATS.join(", ")}, got '${opts.format}'`);
  }
  const lo: LoadOptions = { format: opts.format as SourceFormat | undefined, file: opts.file, dbRoot: opts.dbRoot, strict: !!opts.strict };
  const loaded = loadTaskSource(resolve(source), lo);
  if (loaded.missing.length) process.stderr.write(describeMissing(loaded.missing) + "\n");
  return loaded.tasks;
}

const progress = (label: string) => (done: number, total: number) => {
  if (done === total || done % 200 === 0) process.stderr.write(`[${label}] ${done}/${total}\n`);
};

export function registerTasks(program: Command): void {
  const tasks = program.command("tasks").description("task sets: verify, author, augment, split, stats, export");

  addSourceOptions(tasks.command("verify").description("execute every gold query twice; keep tasks with 1-50 stable, non-NULL rows (--mode eval: every stable gold)"))
    .option("--out <path>", "write the kept tasks to this jsonl file", outFile("--out", "kept.jsonl"))
    .option("--mode <mode>", "train: 1-50 stable, non-NULL rows (the rule for training tasks); eval: every gold that runs and is stable, whatever its rows", "train")
    .option("--dialect <name>", `run the golds as ${DIALECTS.join(" or ")} (default: each task's own; spider for Spider/BIRD folders); kept tasks record it`)
    .option("--workers <n>", "executor worker processes (default: CPU count)", intOption("--workers", 1))
    .option("--json", "print the report as JSON")
    .action(async (source: string, opts: SourceOpts & { out?: string; mode: string; dialect?: string; workers?: number; json?: boolean }) => {
      if (!VERIFY_MODES.includes(opts.mode as VerifyMode)) throw new UsageError(`--mode must be ${VERIFY_MODES.join(" or ")}, got '${opts.mode}'`);
      const dialect = opts.dialect === undefined ? undefined : dialectOption(opts.dialect);
      const list = load(source, opts);
      const executor = await createExecutorPool({ workers: opts.workers });
      try {
        const report = await verifyTasks(list, { executor, mode: opts.mode as VerifyMode, dialect, onProgress: opts.json ? undefined : progress("verify") });
        if (dialect) for (const t of report.kept) t.dialect = dialect;
        if (opts.out) writeTasks(opts.out, report.kept);
        const drops = report.dropped.map((d) => ({ id: d.task.id, reason: d.reason, detail: d.detail }));
        const summary = { total: list.length, kept: report.kept.length, dropped: report.dropped.length, by_reason: report.byReason, drops };
        if (opts.json) printJson(summary);
        else {
          process.stdout.write(`kept ${summary.kept} of ${summary.total}\n`);
          for (const [r, n] of Object.entries(report.byReason)) process.stdout.write(`  dropped ${r}: ${n}\n`);
          for (const d of drops.slice(0, 100)) process.stdout.write(`  ${d.id} ${d.reason}: ${d.detail.slice(0, 160)}\n`);
          if (drops.length > 100) process.stdout.write(`  ... ${drops.length - 100} more (--json lists every drop)\n`);
        }
        if (report.dropped.length) process.exitCode = 1;
      } finally {
        await executor.close();
      }
    });

  tasks
    .command("author")
    .description("write tasks: 'shop' from templates over the live data, or any database with --teacher")
    .argument("[target]", "'shop' for the programmatic shop author (omit with --teacher)")
    .option("--seed <n>", `seed of the programmatic author (default ${DEFAULT_AUTHOR_SEED}, the shipped set)`, intOption("--seed", 0))
    .option("--db <path>", "database to author over (default data/shop/shop.sqlite)")
    .option("--out <path>", "tasks file (default data/shop/tasks.jsonl for shop; required with --teacher)", outFile("--out", "tasks.jsonl"))
    .option("--teacher <spec>", "author with an OpenAI-compatible model: openai:<model>@<base-url>")
    .option("--db-id <id>", "db_id written into teacher tasks (default: the file name without .sqlite)")
    .option("--rounds <n>", "teacher: rounds over all archetype x difficulty cells", intOption("--rounds", 1), 2)
    .option("--per-batch <n>", "teacher: tasks asked for per request", intOption("--per-batch", 1), 8)
    .option("--concurrency <n>", "teacher: requests in flight", intOption("--concurrency", 1), 4)
    .option("--workers <n>", "executor worker processes (default: CPU count)", intOption("--workers", 1))
    .option("--json", "print a summary as JSON")
    .action(async (target: string | undefined, opts: { seed?: number; db?: string; out?: string; teacher?: string; dbId?: string; rounds: number; perBatch: number; concurrency: number; workers?: number; json?: boolean }) => {
      const dbPath = resolve(opts.db ?? defaultShopPath());
      // check every argument before starting worker processes
      if (opts.teacher) {
        parseTeacherSpec(opts.teacher);
        if (!opts.out) throw new UsageError("--out is required with --teacher (tasks are appended there; rerun to resume)");
        if (!existsSync(dbPath)) throw new UsageError(`no database at ${dbPath}; pass --db`);
      } else {
        if (target !== "shop") throw new UsageError(target ? `unknown author target '${target}': use 'shop' or --teacher` : "say what to author: 'shop', or --teacher openai:<model>@<url>");
        if (!existsSync(dbPath)) throw new UsageError(`no shop database at ${dbPath}; build it with 't2s db build shop'`);
      }
      const executor = await createExecutorPool({ workers: opts.workers });
      try {
        if (opts.teacher && opts.out) {
          const r = await runTeacher({
            spec: opts.teacher,
            dbPath,
            dbId: opts.dbId,
            out: resolve(opts.out as string),
            rounds: opts.rounds,
            perBatch: opts.perBatch,
            concurrency: opts.concurrency,
            executor,
            log: (line) => process.stderr.write(line + "\n"),
          });
          if (opts.json) printJson(r);
          else process.stdout.write(`teacher: ${r.kept_now} tasks added (${r.total} in ${r.out}); jobs run ${r.jobs_run}, skipped ${r.jobs_skipped}, failed ${r.jobs_failed}\n`);
          if (r.jobs_failed) process.exitCode = 1;
          return;
        }
        const out = resolve(opts.out ?? kitPath("data", "shop", "tasks.jsonl"));
        const r = await writeShopTaskSet({ dbPath, out, seed: opts.seed, executor, onProgress: opts.json ? undefined : (phase, d, t) => progress(phase)(d, t) });
        const c = r.manifest.counts;
        if (opts.json) printJson({ tasks: r.tasksPath, manifest: r.manifestPath, counts: c, not_kept: r.report.dropped });
        else process.stdout.write(`wrote ${c.count} tasks (${c.train} train, ${c.holdout} holdout, share ${c.holdout_share.toFixed(3)}) to ${r.tasksPath}\nmanifest ${r.manifestPath}\n`);
      } finally {
        await executor.close();
      }
    });

  tasks
    .command("augment")
    .description("write extra train-only shop tasks: the templates with other literal values, none sharing an id or gold SQL with --exclude")
    .requiredOption("--out <path>", "tasks file to write (train split only)", outFile("--out", "extra.jsonl"))
    .option("--seed <n>", "seed of the drafts (the shipped set uses 1)", intOption("--seed", 0), 7)
    .option("--attempts <n>", "drafts per template, also the most tasks kept per template", intOption("--attempts", 1), 100)
    .option("--phrasings <n>", "questions kept per distinct gold query (other words and styles for the same query)", intOption("--phrasings", 1), 1)
    .option("--exclude <path>", "task set the output must not overlap (ids, normalised gold SQL)", kitPath("data", "shop", "tasks.jsonl"))
    .option("--db <path>", "shop database (default data/shop/shop.sqlite)")
    .option("--db-id <id>", "db_id written into the tasks", "shop")
    .option("--workers <n>", "executor worker processes (default: CPU count)", intOption("--workers", 1))
    .option("--json", "print the counts as JSON")
    .action(async (opts: { out: string; seed: number; attempts: number; phrasings: number; exclude: string; db?: string; dbId: string; workers?: number; json?: boolean }) => {
      const dbPath = resolve(opts.db ?? defaultShopPath());
      const out = resolve(opts.out);
      if (out === resolve(opts.exclude)) throw new UsageError(`--out ${opts.out} is the --exclude file; write the extra tasks to another file`);
      if (!existsSync(dbPath)) throw new UsageError(`no shop database at ${dbPath}; build it with 't2s db build shop'`);
      const exclude = readTasks(opts.exclude);
      const executor = await createExecutorPool({ workers: opts.workers });
      // the tasks are written whole at the end (by rename), from the seed alone: a stop leaves --out as it was
      const interrupted = onInterrupt(() => `nothing written: ${out} is written whole at the end and is as it was; the same seed drafts the same tasks again with: ${commandLine()}`);
      try {
        const t0 = Date.now();
        const r = await augmentTrainingTasks(dbPath, { executor, seed: opts.seed, attempts: opts.attempts, phrasings: opts.phrasings, exclude, dbId: opts.dbId, onProgress: opts.json ? undefined : (phase, d, t) => progress(phase)(d, t) });
        writeTasks(out, r.tasks);
        const byArchetype: Record<string, number> = {};
        for (const t of r.tasks) byArchetype[t.archetype] = (byArchetype[t.archetype] ?? 0) + 1;
        const summary = { out, seed: opts.seed, attempts: opts.attempts, candidates: r.candidates, kept: r.tasks.length, dropped: r.dropped, by_archetype: byArchetype, seconds: (Date.now() - t0) / 1000 };
        if (opts.json) return printJson(summary);
        const lines = [`kept ${summary.kept} of ${summary.candidates} drafts (seed ${opts.seed}, ${opts.attempts} per template) in ${summary.seconds.toFixed(1)} s; wrote ${out}`];
        for (const [k, v] of Object.entries(r.dropped).sort((a, b) => b[1] - a[1])) lines.push(`  dropped ${k}: ${v}`);
        lines.push(`by archetype: ${Object.entries(byArchetype).map(([k, v]) => `${k} ${v}`).join(", ")}`);
        process.stdout.write(lines.join("\n") + "\n");
      } finally {
        interrupted();
        await executor.close();
      }
    });

  addSourceOptions(tasks.command("split").description(`show (and optionally write) the train/holdout split: holdout = id hash in the lowest ${HOLDOUT_FRACTION * 100}%`))
    .option("--out-dir <dir>", "write train.jsonl and holdout.jsonl there")
    .option("--json", "print counts as JSON")
    .action((source: string, opts: SourceOpts & { outDir?: string; json?: boolean }) => {
      const list = load(source, opts);
      const train = list.filter((t) => t.split === "train");
      const holdout = list.filter((t) => t.split === "holdout");
      const files: Record<string, string> = {};
      if (opts.outDir) {
        files.train = join(resolve(opts.outDir), "train.jsonl");
        files.holdout = join(resolve(opts.outDir), "holdout.jsonl");
        writeTasks(files.train, train);
        writeTasks(files.holdout, holdout);
      }
      const summary = { total: list.length, train: train.length, holdout: holdout.length, holdout_share: list.length ? holdout.length / list.length : 0, files };
      if (opts.json) printJson(summary);
      else process.stdout.write(`train ${summary.train}, holdout ${summary.holdout} (share ${summary.holdout_share.toFixed(3)})\n${Object.values(files).map((f) => `wrote ${f}\n`).join("")}`);
    });

  addSourceOptions(tasks.command("stats").description("counts by split, archetype x difficulty, style; duplicate checks"))
    .option("--json", "print the stats as JSON")
    .action((source: string, opts: SourceOpts & { json?: boolean }) => {
      const s = taskStats(load(source, opts));
      if (opts.json) return printJson(s);
      const out: string[] = [`tasks ${s.count}: train ${s.train}, holdout ${s.holdout} (share ${s.holdout_share.toFixed(3)})`];
      const diffs = [...new Set(Object.values(s.cells).flatMap((m) => Object.keys(m)))];
      out.push(["archetype".padEnd(18), ...diffs.map((d) => d.padStart(8))].join(""));
      for (const [a, m] of Object.entries(s.cells)) out.push([a.padEnd(18), ...diffs.map((d) => String(m[d] ?? 0).padStart(8))].join(""));
      out.push(`styles: ${Object.entries(s.by_style).map(([k, v]) => `${k} ${v}`).join(", ")}`);
      out.push(`duplicate gold SQL pairs: ${s.duplicate_sql_pairs}; question pairs with word overlap > 0.75: ${s.similar_question_pairs}`);
      process.stdout.write(out.join("\n") + "\n");
    });

  addSourceOptions(tasks.command("export").description("write the set for other trainers: verl-style and TRL-style jsonl (train.jsonl, test.jsonl = holdout)"))
    .requiredOption("--to <format>", `${EXPORT_FORMATS.join(", ")} or all`)
    .option("--out <dir>", "output folder", "export")
    .option("--notes <file>", "database notes to put in the system prompt (default: the shop NOTES for db_id 'shop')")
    .option("--style <style>", "episode style of the prompts: single, or tool (the SQL tool's prompt and schema; verl rows run its tool_agent loop)", "single")
    .option("--protocol <p>", "tool style: native (OpenAI tool_calls) or hermes (<tool_call> text)", "native")
    .option("--max-tool-calls <n>", "tool calls per episode said in the tool prompt", intOption("--max-tool-calls", 0), MAX_TOOL_CALLS)
    .option("--tool-rows <n>", "rows a tool result shows at most, said in the tool prompt", intOption("--tool-rows", 1), TOOL_ROWS)
    .option("--json", "print the written files as JSON")
    .action(async (source: string, opts: SourceOpts & { to: string; out: string; notes?: string; style: string; protocol: string; maxToolCalls: number; toolRows: number; json?: boolean }) => {
      const formats: ExportFormat[] = opts.to === "all" ? EXPORT_FORMATS : [opts.to as ExportFormat];
      if (!formats.every((f) => EXPORT_FORMATS.includes(f))) throw new UsageError(`--to must be ${EXPORT_FORMATS.join(", ")} or all, got '${opts.to}'`);
      const style = oneOf("--style", opts.style, ["single", "tool"] as const);
      const protocol = oneOf("--protocol", opts.protocol, ["native", "hermes"] as const);
      // the prompt /v1/prompt renders for this style: the same builder, config and tool schema
      const prompt: PromptConfig = style === "tool" ? { style, protocol, maxToolCalls: opts.maxToolCalls, toolRows: opts.toolRows } : { style };
      const episode = { style, tools: style === "tool" && protocol === "native" ? [sqlToolSpec()] : [] };
      const list = load(source, opts);
      const { readFileSync } = await import("node:fs");
      const customNotes = opts.notes ? readFileSync(opts.notes, "utf8") : undefined;
      const ddl = new Map<string, string>();
      const messagesFor = (t: Task) => {
        if (!ddl.has(t.db_path)) ddl.set(t.db_path, schemaDdl(t.db_path));
        const notes = customNotes ?? notesFor(t);
        return openingMessages(prompt, ddl.get(t.db_path) as string, notes, t.question, t.evidence);
      };
      const written: Record<string, unknown> = {};
      for (const f of formats) written[f] = exportTasks(list, f, resolve(opts.out), messagesFor, episode);
      if (opts.json) printJson(written);
      else for (const [f, w] of Object.entries(written)) process.stdout.write(`${f}: ${JSON.stringify(w)}\n`);
    });
}
