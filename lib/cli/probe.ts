/**
 * `t2s probe long-context`: one model skill measured as a curve. A probe is a set of benchmarks that
 * differ in one setting, so it lives beside `t2s benchmark` (rows files, the verifier, bootstrap intervals)
 * rather than among the speed benches of bench/, which time the kit, not a model.
 */
import type { Command } from "commander";
import { resolve } from "node:path";
import { QUANTIZATION_HELP, quantizationOption, type QuantizationName } from "../model/quantization.js";
import { KV_CACHE_DTYPE_HELP, kvCacheDtypeOption, type KvCacheDtypeName } from "../model/kv-cache-dtype.js";
import { formatLongContext, longContextProbe, MAX_LEVEL, parseLevels } from "../runs/long-context.js";
import { commandLine, onInterrupt } from "./interrupt.js";
import { intOption, numberOption, oneOf, printJson } from "./options.js";
import { CONCURRENCY, SAMPLING_TEMPERATURE, TOOL_CHARS, TOOL_ROWS } from "../core/defaults.js";

/**
 * The probe's reply budget: the tool recipe's tokens per turn (reports/round-tool.md). Every level must
 * leave a whole reply's room in the model's context, so the benchmark default (the whole window) would
 * refuse every padded level.
 */
const PROBE_MAX_TOKENS = 200;

interface LongContextFlags {
  policy: string;
  tasks: string;
  split: string;
  limit?: number;
  sample?: number;
  sampleSeed: number;
  levels: string;
  padSeed: number;
  k: number;
  temperature: number;
  topP?: number;
  maxTokens: number;
  toolRows: number;
  toolChars: number;
  toolTruncate: string;
  concurrency: number;
  seed: number;
  evalRun: string;
  outDir: string;
  force?: boolean;
  workers?: number;
  quantization?: QuantizationName;
  kvCacheDtype?: KvCacheDtypeName;
  quiet?: boolean;
  json?: boolean;
}

export function registerProbe(program: Command): void {
  const probe = program.command("probe").description("measure one model skill as a curve over a setting (a benchmark per point)");
  probe
    .command("long-context")
    .description(
      "ask the same tasks in single style with the prompt padded to each --levels token count by earlier tool calls that cannot help " +
        "(real queries on tables and columns the gold query does not name, with their real results); one resumable rows file per level " +
        "in --out-dir, then one table: prompt tokens reached, pass@1 [95% CI], paired change from the first level, n",
    )
    .requiredOption("--policy <spec>", "tfjs:<model dir>[+<adapter dir>] (padding counts tokens with the model's own tokenizer)")
    .requiredOption("--tasks <file>", "task jsonl file (e.g. data/shop/tasks.jsonl)")
    .requiredOption("--out-dir <dir>", "folder of the rows files, pad-<tokens>.jsonl (re-running the same command resumes them)")
    .option("--levels <list>", `prompt tokens to pad to, comma-separated: 0 for no padding, '${MAX_LEVEL}' for the model's context less --max-tokens`, `0,1000,${MAX_LEVEL}`)
    .option("--pad-seed <n>", "seed of the padding queries (each task draws its own)", intOption("--pad-seed", 0), 0)
    .option("--split <split>", "train, holdout or all", "holdout")
    .option("--limit <n>", "only the first n tasks of the split, in file order", intOption("--limit", 1))
    .option("--sample <n>", "only n tasks of the split drawn at random with --sample-seed (a fixed subset where every task would take too long)", intOption("--sample", 1))
    .option("--sample-seed <n>", "seed of --sample", intOption("--sample-seed", 0), 0)
    .option("--k <n>", "samples per task and level", intOption("--k", 1), 1)
    .option("--temperature <t>", "sampling temperature", numberOption("--temperature", { min: 0 }), SAMPLING_TEMPERATURE)
    .option("--top-p <p>", "nucleus sampling top_p (default: none)", numberOption("--top-p", { gt: 0, max: 1 }))
    .option("--max-tokens <n>", "tokens of the reply; each level plus this must fit the model's context", intOption("--max-tokens", 1), PROBE_MAX_TOKENS)
    .option("--tool-rows <n>", "rows a padding tool result shows at most", intOption("--tool-rows", 1), TOOL_ROWS)
    .option("--tool-chars <n>", "characters of a padding tool result kept when cut in the middle", intOption("--tool-chars", 16), TOOL_CHARS)
    .option("--tool-truncate <mode>", "middle or rows", "middle")
    .option("--concurrency <n>", "episodes in flight", intOption("--concurrency", 1), CONCURRENCY)
    .option("--seed <n>", "run seed; a sample's seed is the same at every level", intOption("--seed", 0), 0)
    .option("--eval-run <id>", "replication id stored in every row", "0")
    .option("--force", "add to rows files whose metadata differs")
    .option("--workers <n>", "SQL worker processes (default: CPU count)", intOption("--workers", 1))
    .option("--quantization <q>", `${QUANTIZATION_HELP} (default none)`, quantizationOption)
    .option("--kv-cache-dtype <d>", `${KV_CACHE_DTYPE_HELP} (default auto)`, kvCacheDtypeOption)
    .option("--quiet", "no progress lines on stderr")
    .option("--json", "print JSON {policy, levels: [...]} instead of the table")
    .action(async (f: LongContextFlags) => {
      const levels = parseLevels(f.levels);
      const split = oneOf("--split", f.split, ["train", "holdout", "all"] as const);
      const interrupted = onInterrupt(() => `the rows files in ${f.outDir} keep every finished episode; the same command resumes the probe: ${commandLine()}`);
      const t0 = Date.now();
      const result = await longContextProbe({
        policy: f.policy,
        tasks: f.tasks,
        split: split === "all" ? undefined : split,
        limit: f.limit,
        sample: f.sample === undefined ? undefined : { n: f.sample, seed: f.sampleSeed },
        levels,
        outDir: resolve(f.outDir),
        padSeed: f.padSeed,
        k: f.k,
        sampling: { temperature: f.temperature, top_p: f.topP, max_tokens: f.maxTokens },
        toolRows: f.toolRows,
        toolChars: f.toolChars,
        toolTruncate: oneOf("--tool-truncate", f.toolTruncate, ["middle", "rows"] as const),
        concurrency: f.concurrency,
        seed: f.seed,
        evalRun: f.evalRun,
        force: f.force,
        workers: f.workers,
        quantization: f.quantization,
        kvCacheDtype: f.kvCacheDtype,
        progressStream: f.quiet ? undefined : process.stderr,
        onNote: (text) => process.stderr.write(text + "\n"),
      }).finally(interrupted);
      if (f.json) printJson({ ...result, seconds: (Date.now() - t0) / 1000 });
      else process.stdout.write(formatLongContext(result) + `wall time ${((Date.now() - t0) / 1000).toFixed(0)} s\n`);
    });
}
