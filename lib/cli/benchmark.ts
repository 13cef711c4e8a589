/** `t2s benchmark`: k sampled episodes per task against a policy, written to a resumable rows file, then the report. */
import { QUANTIZATION_HELP, quantizationOption, type QuantizationName } from "../model/quantization.js";
import { KV_CACHE_DTYPE_HELP, kvCacheDtypeOption, type KvCacheDtypeName } from "../model/kv-cache-dtype.js";
import type { Command } from "commander";
import { UsageError } from "../core/errors.js";
import { benchmark } from "../runs/benchmark.js";
import { formatFacts } from "../runs/facts.js";
import { progressLine } from "../runs/progress.js";
import { completeRows } from "../runs/store.js";
import { resolve } from "node:path";
import { commandLine, onInterrupt } from "./interrupt.js";
import { DEFAULT_B, DEFAULT_SEED } from "../stats/bootstrap.js";
import { formatSummary } from "./stats-report.js";
import { collect, dialectOption, intOption, numberOption, oneOf, outFile, printJson } from "./options.js";
import type { RunGrading } from "../runs/meta.js";
import { CONCURRENCY, MAX_TOKENS_PER_TURN, MAX_TOOL_CALLS, SAMPLES_PER_TASK, SAMPLING_TEMPERATURE, TOOL_CHARS, TOOL_ROWS } from "../core/defaults.js";

interface BenchmarkFlags {
  policy: string;
  quantization?: QuantizationName;
  kvCacheDtype?: KvCacheDtypeName;
  allowBaseMismatch?: boolean;
  tasks: string;
  split?: string;
  k: number;
  temperature: number;
  topP?: number;
  style: string;
  protocol: string;
  maxTokens: number;
  maxToolCalls: number;
  maxContext?: number;
  padContext?: number;
  padSeed?: number;
  toolRows: number;
  toolChars: number;
  toolTruncate: string;
  concurrency: number;
  seed: number;
  evalRun: string;
  limit?: number;
  band?: string;
  out: string;
  force?: boolean;
  preset?: string;
  warmup?: number;
  retries: number;
  backoffMs: number;
  requestTimeout?: number;
  workers?: number;
  by: string[];
  quiet?: boolean;
  json?: boolean;
  maxRows?: number;
  dialect?: string;
  distinct?: string;
  strict?: boolean;
}

export function registerBenchmark(program: Command): void {
  program
    .command("benchmark")
    .description("sample k episodes per task from a policy, grade them, write rows (resumable: re-run the same command) and print the report")
    .requiredOption("--policy <spec>", "openai:<model>@<base_url> (any OpenAI-compatible server), scripted:<file>, or tfjs:<dir>[+<adapter>]")
    .requiredOption("--tasks <file>", "task jsonl file (e.g. data/shop/tasks.jsonl), Spider/BIRD folder or BIRD-Platinum file")
    .option("--strict", "a task whose database file is missing is an error (default: skip it, listing the missing databases)")
    .option("--max-rows <n>", "row cap of gold and answer when grading (default 200; 1000000 for spider-dialect tasks)", intOption("--max-rows", 1))
    .option("--dialect <name>", "run golds and answers as sqlite or spider (default: each task's own; spider for Spider/BIRD folders)")
    .option("--distinct <rule>", "keep, or ignore: remove every DISTINCT from gold and answer before running them (Spider's default)")
    .requiredOption("--out <file>", "rows file (jsonl, append-only); its metadata goes to <file>.meta.json", outFile("--out", "rows.jsonl"))
    .option("--split <split>", "only tasks of this split: train or holdout (default: all)")
    .option("--band <file:lo:hi>", "only tasks whose pass rate in an earlier rows file lies in [lo, hi], as training selects its band (e.g. base-train.jsonl:0.1:0.9)")
    .option("--limit <n>", "only the first n tasks (after --split and --band)", intOption("--limit", 1))
    .option("--k <n>", "samples per task", intOption("--k", 1), SAMPLES_PER_TASK)
    .option("--temperature <t>", "sampling temperature", numberOption("--temperature", { min: 0 }), SAMPLING_TEMPERATURE)
    .option("--top-p <p>", "nucleus sampling top_p (default: the server's)", numberOption("--top-p", { gt: 0, max: 1 }))
    .option("--style <style>", "single (one reply, graded) or tool (SQL tool calls, then a final answer)", "single")
    .option("--protocol <p>", "tool style: native (OpenAI tool_calls) or hermes (<tool_call> text)", "native")
    .option("--max-tokens <n>", "tokens per turn, cut to the room the model's context leaves after the prompt; a reply cut by it is 'truncated'", intOption("--max-tokens", 1), MAX_TOKENS_PER_TURN)
    .option("--max-tool-calls <n>", "tool calls per episode (tool style)", intOption("--max-tool-calls", 0), MAX_TOOL_CALLS)
    .option("--max-context <n>", "total context budget in tokens; a turn that would pass it ends the episode as truncated", intOption("--max-context", 1))
    .option("--pad-context <tokens>", "single style: pad each prompt to about this many tokens with earlier tool calls that cannot help (real queries on tables and columns the gold query does not name, their real results), so the model answers that far into its context; recorded in the metadata and every row", intOption("--pad-context", 0))
    .option("--pad-seed <n>", "seed of the padding queries, each task drawing its own stream (default 0)", intOption("--pad-seed", 0))
    .option("--tool-rows <n>", "rows a tool result shows at most", intOption("--tool-rows", 1), TOOL_ROWS)
    .option("--tool-chars <n>", "characters of a tool result kept when cut in the middle", intOption("--tool-chars", 16), TOOL_CHARS)
    .option("--tool-truncate <mode>", "middle (head ...(truncated)... tail) or rows (whole rows only)", "middle")
    .option("--concurrency <n>", "episodes and requests in flight", intOption("--concurrency", 1), CONCURRENCY)
    .option("--seed <n>", "run seed; each sample's seed derives from (seed, eval run, task, sample)", intOption("--seed", 0), 0)
    .option("--eval-run <id>", "replication id stored in every row (rows are keyed by eval run, task, sample)", "0")
    .option("--force", "add to a rows file whose metadata (policy, sampling, prompt, tasks) differs")
    .option("--preset <name>", "reward preset: shaped, binary or tool-rl (default: the verifier's)")
    .option("--warmup <seconds>", "wait up to this long for the server to answer before starting", intOption("--warmup", 1))
    .option("--retries <n>", "retries per request on 429/5xx/connection errors/timeouts", intOption("--retries", 0), 6)
    .option("--backoff-ms <n>", "first retry delay in ms (doubles each retry, jittered, capped at 60 s)", intOption("--backoff-ms", 0), 1000)
    .option("--request-timeout <seconds>", "per-request timeout (default max(300, max-tokens / 4))", intOption("--request-timeout", 1))
    .option("--workers <n>", "SQL worker processes (default: CPU count)", intOption("--workers", 1))
    .option("--quantization <q>", `tfjs: policies: ${QUANTIZATION_HELP} (default none)`, quantizationOption)
    .option("--kv-cache-dtype <d>", `tfjs: policies: ${KV_CACHE_DTYPE_HELP} (default auto)`, kvCacheDtypeOption)
    .option("--by <field>", "report groups (repeatable; default difficulty and archetype)", collect, [])
    .option("--allow-base-mismatch", "tfjs:<model>+<adapter>: load an adapter recorded as trained on another base model (refused by default)")
    .option("--quiet", "no progress line on stderr")
    .option("--json", "print JSON {summary, facts, progress, meta} instead of the report")
    .action(async (f: BenchmarkFlags) => {
      const split = f.split === undefined ? undefined : oneOf("--split", f.split, ["train", "holdout"] as const);
      if (f.padSeed !== undefined && f.padContext === undefined) throw new UsageError("--pad-seed chooses the padding queries; it needs --pad-context");
      // every finished episode is a whole row on disk the moment it lands: a stop loses none of them
      const interrupted = onInterrupt(() => `${f.out} keeps ${completeRows(resolve(f.out))} row(s), one per finished episode; the same command resumes the run: ${commandLine()}`);
      const { result, summary, facts } = await benchmark({
        policy: f.policy,
        allowBaseMismatch: f.allowBaseMismatch,
        tasks: f.tasks,
        strict: f.strict,
        grading: gradingFlags(f),
        split,
        band: f.band === undefined ? undefined : parseBand(f.band),
        limit: f.limit,
        k: f.k,
        out: f.out,
        style: oneOf("--style", f.style, ["single", "tool"] as const),
        protocol: oneOf("--protocol", f.protocol, ["native", "hermes"] as const),
        sampling: { temperature: f.temperature, top_p: f.topP, max_tokens: f.maxTokens },
        maxToolCalls: f.maxToolCalls,
        maxContextTokens: f.maxContext,
        padContext: f.padContext,
        padSeed: f.padSeed,
        toolRows: f.toolRows,
        toolChars: f.toolChars,
        toolTruncate: oneOf("--tool-truncate", f.toolTruncate, ["middle", "rows"] as const),
        concurrency: f.concurrency,
        seed: f.seed,
        evalRun: f.evalRun,
        force: f.force,
        preset: f.preset === undefined ? undefined : oneOf("--preset", f.preset, ["shaped", "binary", "tool-rl"] as const),
        warmupS: f.warmup,
        retries: f.retries,
        backoffMs: f.backoffMs,
        requestTimeoutS: f.requestTimeout,
        workers: f.workers,
        quantization: f.quantization,
        kvCacheDtype: f.kvCacheDtype,
        by: f.by.length ? f.by : undefined,
        progressStream: f.quiet ? undefined : process.stderr,
        // skipped tasks are a warning, not progress: --quiet keeps it
        onNote: (text) => process.stderr.write(text + "\n"),
      }).finally(interrupted);
      const p = result.progress;
      if (result.tornBytes) process.stderr.write(`note: cut off a torn last line (${result.tornBytes} bytes) of ${f.out} left by an interrupted run\n`);
      if (result.duplicates) process.stderr.write(`warning: ${f.out} holds ${result.duplicates} duplicate row(s); they are ignored\n`);
      if (f.json) printJson({ summary, facts, progress: p, meta: result.meta, lost_examples: result.lostExamples, refused_examples: result.refusedExamples });
      else {
        if (result.rows.length) process.stdout.write(formatSummary(f.out, result.rows, summary, DEFAULT_B, DEFAULT_SEED) + "\n" + formatFacts(facts));
        process.stdout.write(`run: ${progressLine(p)}\n`);
      }
      if (p.lost > 0) {
        const examples = Object.values(result.lostExamples).map((m) => `  ${m}`).join("\n");
        process.stderr.write(`warning: ${p.lost} episode(s) lost (no row written):\n${examples}\nrun the same command again to fill them\n`);
        process.exitCode = 1;
      }
      if (p.refused > 0) {
        const examples = Object.values(result.refusedExamples).map((m) => `  ${m}`).join("\n");
        process.stderr.write(`warning: the server refused ${p.refused} episode(s) for the run's setup; they are recorded as setup-error rows and not scored:\n${examples}\n`);
        process.exitCode = 1;
      }
    });
}

/** The grading options the flags ask for (undefined when none). */
function gradingFlags(f: BenchmarkFlags): RunGrading | undefined {
  const g: RunGrading = {};
  if (f.dialect !== undefined) g.dialect = dialectOption(f.dialect);
  if (f.distinct !== undefined) g.distinct = oneOf("--distinct", f.distinct, ["keep", "ignore"] as const);
  if (f.maxRows !== undefined) g.max_rows = f.maxRows;
  return Object.keys(g).length ? g : undefined;
}

/** "<file>:<lo>:<hi>" -> the band; the file name may itself hold colons. */
export function parseBand(spec: string): { rows: string; lo: number; hi: number } {
  const m = /^(.+):([0-9.]+):([0-9.]+)$/.exec(spec);
  const lo = m ? Number(m[2]) : NaN;
  const hi = m ? Number(m[3]) : NaN;
  if (!m || !(lo >= 0 && hi <= 1 && lo <= hi)) throw new UsageError(`--band '${spec}' must look like <rows file>:<lo>:<hi> with 0 <= lo <= hi <= 1`);
  return { rows: m[1], lo, hi };
}
