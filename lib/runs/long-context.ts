/**
 * The long-context probe: the same tasks benchmarked in single style at several context-padding levels
 * (benchmark --pad-context; lib/episode/padding.ts), one resumable rows file per level, summarised as one
 * table: the prompt length each level reached, pass@1 with its bootstrap interval, and the paired change
 * from the first level. Every level uses the same sample seeds, so the levels differ only by the padding
 * and a paired comparison is fair.
 */
import { join, resolve } from "node:path";
import { UsageError } from "../core/errors.js";
import { loadPolicy } from "../policy/spec.js";
import type { Policy } from "../policy/types.js";
import { pairedDelta } from "../stats/delta.js";
import type { Interval } from "../stats/bootstrap.js";
import { fmt, fmtCI, fmtSigned, formatTable } from "../stats/format.js";
import { summarize } from "../stats/summary.js";
import { benchmark, checkPaddingFits, type BenchmarkOptions } from "./benchmark.js";
import type { RolloutRow } from "./row.js";
import { MAX_TOKENS_PER_TURN } from "../core/defaults.js";

/** A level written as this word pads to the most the model's context allows: its window less --max-tokens. */
export const MAX_LEVEL = "max";

export interface LongContextOptions extends Omit<BenchmarkOptions, "out" | "style" | "padContext" | "protocol" | "maxToolCalls" | "maxContextTokens" | "by"> {
  /** Padding levels in prompt tokens (0: no padding), or MAX_LEVEL; samples per task and level default to 1. */
  levels: Array<number | typeof MAX_LEVEL>;
  /** Folder of the rows files, one per level: pad-<tokens>.jsonl. */
  outDir: string;
}

/** One level's line of the table. */
export interface LevelResult {
  /** The padding target in prompt tokens (0: none). */
  level: number;
  rows_file: string;
  /** Prompt tokens of the graded turn as the model counted them (tokens_in of single-style rows). */
  prompt_tokens: { mean: number | null; min: number | null; max: number | null };
  /** Padding tool calls per row. */
  pad_calls: number | null;
  pass1: number | null;
  pass1_ci: Interval | null;
  /** Paired pass@1 change from the first level, over the tasks both have. */
  delta: number | null;
  delta_ci: Interval | null;
  n_tasks: number;
  n_rows: number;
  /** Share of rows with no SQL in the reply (a tool call instead of an answer counts here). */
  no_sql: number | null;
}

export interface LongContextResult {
  policy: string;
  levels: LevelResult[];
}

/** Parses a --levels value: comma-separated token counts (0: no padding) and/or "max", each once. */
export function parseLevels(text: string): Array<number | typeof MAX_LEVEL> {
  const parts = text.split(",").map((s) => s.trim()).filter(Boolean);
  if (parts.length === 0) throw new UsageError(`--levels needs at least one level, e.g. 0,1000,${MAX_LEVEL}`);
  const out = parts.map((p) => {
    if (p === MAX_LEVEL) return MAX_LEVEL;
    const n = Number(p);
    if (!/^\d+$/.test(p) || !Number.isSafeInteger(n)) throw new UsageError(`--levels: '${p}' is not a token count (a whole number >= 0) or '${MAX_LEVEL}'`);
    return n;
  });
  if (new Set(out).size !== out.length) throw new UsageError(`--levels '${text}' names a level twice`);
  return out;
}

/** The levels as token counts: MAX_LEVEL resolved against the policy's window, each checked to leave room for a reply. */
export function resolveLevels(levels: Array<number | typeof MAX_LEVEL>, policy: Policy, maxTokens: number): number[] {
  const window = policy.contextWindow?.() ?? null;
  const out = levels.map((l) => {
    if (l !== MAX_LEVEL) return l;
    if (window === null) throw new UsageError(`--levels ${MAX_LEVEL} needs the model's context window, which ${policy.name} does not report; name the level in tokens`);
    return window - maxTokens;
  });
  for (const l of out) checkPaddingFits(policy, l, maxTokens);
  return out;
}

const meanOf = (xs: number[]) => (xs.length ? xs.reduce((a, b) => a + b, 0) / xs.length : null);

function levelResult(level: number, file: string, rows: RolloutRow[], first: RolloutRow[] | null, k: number): LevelResult {
  const scored = rows.filter((r) => r.outcome !== "setup_error");
  const tokens = scored.map((r) => r.tokens_in);
  const s = summarize(scored, { k, by: [] });
  const d = first && first !== rows ? pairedDelta(first, scored, { markers: [] }) : null;
  return {
    level,
    rows_file: file,
    prompt_tokens: { mean: meanOf(tokens), min: tokens.length ? Math.min(...tokens) : null, max: tokens.length ? Math.max(...tokens) : null },
    pad_calls: meanOf(scored.map((r) => r.pad_calls ?? 0)),
    pass1: s.pass1,
    pass1_ci: s.pass1_ci,
    delta: d ? d.delta : null,
    delta_ci: d ? d.ci : null,
    n_tasks: s.n_tasks,
    n_rows: s.n_rows,
    no_sql: scored.length ? scored.filter((r) => !r.has_sql).length / scored.length : null,
  };
}

/**
 * Runs (or resumes) every level and returns the table. The policy is loaded once and every level is
 * checked against its context before any episode runs, so a level that cannot fit fails at once.
 */
export async function longContextProbe(opts: LongContextOptions): Promise<LongContextResult> {
  const { levels, outDir, ...common } = opts;
  const policy = typeof opts.policy === "string" ? await loadPolicy(opts.policy, { quantization: opts.quantization, kvCacheDtype: opts.kvCacheDtype, allowBaseMismatch: opts.allowBaseMismatch, concurrency: opts.concurrency }) : opts.policy;
  try {
    const maxTokens = opts.sampling?.max_tokens ?? MAX_TOKENS_PER_TURN;
    // one sample per task and level unless asked: a level is a curve point, and the levels pair by task
    const k = opts.k ?? 1;
    const tokens = resolveLevels(levels, policy, maxTokens);
    const out: LevelResult[] = [];
    let first: RolloutRow[] | null = null;
    for (const level of tokens) {
      const file = resolve(join(outDir, `pad-${level}.jsonl`));
      const { result } = await benchmark({ ...common, policy, k, style: "single", padContext: level, out: file, by: [] });
      first ??= result.rows;
      out.push(levelResult(level, file, result.rows, first, k));
    }
    return { policy: policy.name, levels: out };
  } finally {
    if (typeof opts.policy === "string") await policy.close?.();
  }
}

/** The probe's table as text. */
export function formatLongContext(r: LongContextResult): string {
  const f0 = (x: number | null) => (x === null ? "-" : x.toFixed(0));
  const header = ["level", "prompt tokens mean [min, max]", "pad calls", "pass@1", "95% CI", "vs first level [95% CI]", "no SQL", "tasks", "rows"];
  const lines = r.levels.map((l, i) => [
    l.level === 0 ? "none" : String(l.level),
    `${f0(l.prompt_tokens.mean)} [${f0(l.prompt_tokens.min)}, ${f0(l.prompt_tokens.max)}]`,
    l.pad_calls === null ? "-" : l.pad_calls.toFixed(1),
    fmt(l.pass1),
    fmtCI(l.pass1_ci),
    i === 0 ? "-" : `${fmtSigned(l.delta)} ${fmtCI(l.delta_ci, 3, true)}`,
    l.no_sql === null ? "-" : `${(100 * l.no_sql).toFixed(1)}%`,
    String(l.n_tasks),
    String(l.n_rows),
  ]);
  return `${r.policy}: single style, padded with tool turns that cannot help\n` + formatTable(header, lines);
}
