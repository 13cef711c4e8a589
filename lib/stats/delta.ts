/**
 * `t2s delta`: the paired comparison of two rows files (a = before, b = after) on the tasks both have.
 * A task's pass rate p is pooled over all its samples and eval runs; delta = mean over paired tasks of
 * p_b - p_a, with a percentile bootstrap interval over tasks, a sign-flip p-value, per-run deltas, the
 * verdict, what the comparison can detect, the same for marker fields, and the same per group.
 */
import { bootstrapCI, DEFAULT_B, DEFAULT_SEED, type Interval } from "./bootstrap.js";
import { mean } from "./estimators.js";
import { DEFAULT_PERMUTATIONS, signFlipTest } from "./permutation.js";
import { pairedPower } from "./power.js";
import { deriveSeed } from "../core/random.js";
import { binaryValue, compareIds, dedupeRows, evalRunOf, evalRuns, isBinary, splitByGroup, taskCounts, validateRows, withoutSetupErrors, type StatRow } from "./rows.js";
import { noiseBand, verdictFor, type NoiseBand, type Verdict } from "./verdict.js";
import { UsageError } from "../core/errors.js";

export interface DeltaOptions {
  /** Grouping fields: the comparison is repeated on each group's rows. */
  by?: string[];
  /** Bootstrap resamples (default 2000). */
  B?: number;
  /** Seed of the bootstrap and of the Monte Carlo permutation test (default 0). */
  seed?: number;
  /** Random sign flips when the exact test is too big (default 10000). */
  permutations?: number;
  /** Marker fields to compare (default: every field whose values are all booleans, plus executes/has_sql). */
  markers?: string[];
}

/** The paired comparison of one 0/1 marker field (e.g. executes). */
export interface MarkerDelta {
  n_paired: number;
  /** Mean over paired tasks of the marker's rate in a. */
  a: number | null;
  b: number | null;
  delta: number | null;
  ci: Interval | null;
  p: number | null;
}

/** The numbers of one paired comparison (the whole files, or one group). */
export interface DeltaStats {
  n_paired: number;
  delta: number | null;
  ci: Interval | null;
  p: number | null;
  verdict: Verdict;
  runs_a: number;
  runs_b: number;
  /** Paired delta of run i of a vs run i of b (runs sorted by id), for i < min(runs_a, runs_b). */
  run_deltas: (number | null)[];
  detectable_effect: number | null;
  tasks_needed: number | null;
  markers: Record<string, MarkerDelta>;
  /** Rows of a and of b left out because they repeat an earlier row's (eval run, task, sample); the first of each counts. */
  duplicates_dropped: { a: number; b: number };
}

/** The JSON of `t2s delta --json`. */
export interface DeltaReport extends DeltaStats {
  by: Record<string, Record<string, DeltaStats>>;
}

/** What lies behind one comparison's numbers, for readable output and notebooks. */
export interface DeltaDetail {
  stats: DeltaStats;
  /** Mean pass rate over the paired tasks in a and in b. */
  a: number | null;
  b: number | null;
  p_exact: boolean;
  sd: number | null;
  noise: NoiseBand | null;
  run_ids_a: string[];
  run_ids_b: string[];
  /** Per-run pass@1 over the paired tasks. */
  run_pass1_a: number[];
  run_pass1_b: number[];
}

/** One paired task. */
export interface PairedTask {
  task_id: string;
  a: number;
  b: number;
  diff: number;
}

const RESERVED = new Set(["task_id", "sample", "eval_run", "correct"]);
const KNOWN_MARKERS = ["executes", "has_sql"];

/**
 * Returns the tasks present in both `a` and `b` (sorted by id) with their pooled rates of `field`
 * (default "correct"); rows where the field is not 0/1 are left out.
 */
export function pairTasks(a: readonly StatRow[], b: readonly StatRow[], field = "correct"): PairedTask[] {
  const value = (r: StatRow) => {
    const v = r[field];
    return isBinary(v) ? binaryValue(v) : null;
  };
  const rateA = new Map(taskCounts(a, value).map((t) => [t.task_id, t.c / t.n]));
  const out: PairedTask[] = [];
  for (const t of taskCounts(b, value)) {
    const pa = rateA.get(t.task_id);
    if (pa === undefined) continue;
    const pb = t.c / t.n;
    out.push({ task_id: t.task_id, a: pa, b: pb, diff: pb - pa });
  }
  return out.sort((x, y) => compareIds(x.task_id, y.task_id));
}

/**
 * Returns the marker fields of two rows files: fields other than task_id/sample/eval_run/correct whose
 * values (where present and not null) are all booleans in both files, plus executes and has_sql when
 * their values are all 0/1. Sorted by name.
 */
export function detectMarkers(a: readonly StatRow[], b: readonly StatRow[]): string[] {
  const kinds = (rows: readonly StatRow[]) => {
    const k = new Map<string, { bool: boolean; binary: boolean }>();
    for (const row of rows) {
      for (const [field, v] of Object.entries(row)) {
        if (RESERVED.has(field) || v === null || v === undefined) continue;
        let s = k.get(field);
        if (!s) k.set(field, (s = { bool: true, binary: true }));
        if (typeof v !== "boolean") s.bool = false;
        if (!isBinary(v)) s.binary = false;
      }
    }
    return k;
  };
  const ka = kinds(a);
  const kb = kinds(b);
  const out: string[] = [];
  for (const [field, sa] of ka) {
    const sb = kb.get(field);
    if (!sb) continue;
    if ((sa.bool && sb.bool) || (KNOWN_MARKERS.includes(field) && sa.binary && sb.binary)) out.push(field);
  }
  return out.sort(compareIds);
}

interface Settings {
  B: number;
  seed: number;
  permutations: number;
}

function checkOptions(opts: DeltaOptions): Settings {
  const B = opts.B ?? DEFAULT_B;
  const seed = opts.seed ?? DEFAULT_SEED;
  const permutations = opts.permutations ?? DEFAULT_PERMUTATIONS;
  if (!Number.isInteger(B) || B < 1) throw new UsageError(`B must be an integer >= 1, got ${B}`);
  if (!Number.isInteger(seed)) throw new UsageError(`seed must be an integer, got ${seed}`);
  if (!Number.isInteger(permutations) || permutations < 1) throw new UsageError(`permutations must be an integer >= 1, got ${permutations}`);
  return { B, seed, permutations };
}

function diffsStats(pairs: readonly PairedTask[], s: Settings): { delta: number | null; ci: Interval | null; p: number | null; exact: boolean } {
  const diffs = pairs.map((t) => t.diff);
  if (diffs.length === 0) return { delta: null, ci: null, p: null, exact: true };
  const test = signFlipTest(diffs, { permutations: s.permutations, seed: deriveSeed(s.seed, 1) });
  return { delta: mean(diffs), ci: bootstrapCI(diffs, { B: s.B, seed: s.seed }), p: test.p, exact: test.exact };
}

/** Returns the comparison of one marker field over the tasks both files have it for. */
export function markerDelta(a: readonly StatRow[], b: readonly StatRow[], field: string, opts: DeltaOptions = {}): MarkerDelta {
  const s = checkOptions(opts);
  const pairs = pairTasks(dedupeRows(withoutSetupErrors(a).rows).rows, dedupeRows(withoutSetupErrors(b).rows).rows, field);
  const d = diffsStats(pairs, s);
  return { n_paired: pairs.length, a: mean(pairs.map((t) => t.a)), b: mean(pairs.map((t) => t.b)), delta: d.delta, ci: d.ci, p: d.p };
}

/** Per-run pass@1 over `tasks`: for each run (sorted), the mean of c/n over the tasks it has. */
function runPass1(rows: readonly StatRow[], runIds: readonly string[]): number[] {
  return runIds.map((run) => mean(taskCounts(rows.filter((r) => evalRunOf(r) === run)).map((t) => t.c / t.n)) as number);
}

/**
 * Returns the full comparison of `a` and `b` (no groups), with what lies behind the numbers. Setup-error
 * rows are left out; rows repeating an (eval run, task, sample) key are de-duplicated first (the first
 * kept; counted in `stats.duplicates_dropped`).
 */
export function compareRows(inputA: readonly StatRow[], inputB: readonly StatRow[], opts: DeltaOptions = {}): DeltaDetail {
  const s = checkOptions(opts);
  validateRows(inputA, "a");
  validateRows(inputB, "b");
  const { rows: a, duplicates: dupA } = dedupeRows(withoutSetupErrors(inputA).rows);
  const { rows: b, duplicates: dupB } = dedupeRows(withoutSetupErrors(inputB).rows);
  const pairs = pairTasks(a, b);
  const paired = new Set(pairs.map((t) => t.task_id));
  const pa = a.filter((r) => paired.has(String(r.task_id)));
  const pb = b.filter((r) => paired.has(String(r.task_id)));
  const d = diffsStats(pairs, s);
  const runIdsA = evalRuns(pa);
  const runIdsB = evalRuns(pb);
  const runPass1A = runPass1(pa, runIdsA);
  const runPass1B = runPass1(pb, runIdsB);
  const noise = noiseBand(runPass1A, runPass1B);
  const runDeltas: (number | null)[] = [];
  for (let i = 0; i < Math.min(runIdsA.length, runIdsB.length); i++) {
    const runA = pa.filter((r) => evalRunOf(r) === runIdsA[i]);
    const runB = pb.filter((r) => evalRunOf(r) === runIdsB[i]);
    runDeltas.push(mean(pairTasks(runA, runB).map((t) => t.diff)));
  }
  const power = pairedPower(pairs.map((t) => t.diff));
  // fromEntries defines own properties, so even a field named "__proto__" lands as a key
  const markers: Record<string, MarkerDelta> = Object.fromEntries((opts.markers ?? detectMarkers(a, b)).map((field) => [field, markerDelta(a, b, field, s)]));
  const stats: DeltaStats = {
    n_paired: pairs.length,
    delta: d.delta,
    ci: d.ci,
    p: d.p,
    verdict: verdictFor({ n_paired: pairs.length, delta: d.delta, ci: d.ci, band: noise ? noise.band : null }),
    runs_a: runIdsA.length,
    runs_b: runIdsB.length,
    run_deltas: runDeltas,
    detectable_effect: power.detectable_effect,
    tasks_needed: power.tasks_needed,
    markers,
    duplicates_dropped: { a: dupA.count, b: dupB.count },
  };
  return {
    stats,
    a: mean(pairs.map((t) => t.a)),
    b: mean(pairs.map((t) => t.b)),
    p_exact: d.exact,
    sd: power.sd,
    noise,
    run_ids_a: runIdsA,
    run_ids_b: runIdsB,
    run_pass1_a: runPass1A,
    run_pass1_b: runPass1B,
  };
}

/** Returns the comparison of every group of every `by` field (rows of a and b split by the field's value). */
export function compareGroups(a: readonly StatRow[], b: readonly StatRow[], opts: DeltaOptions = {}): Record<string, Record<string, DeltaDetail>> {
  const out: Record<string, Record<string, DeltaDetail>> = {};
  // de-duplicated before the split, so two copies of a sample filed under different groups count once
  const ua = dedupeRows(withoutSetupErrors(a).rows).rows;
  const ub = dedupeRows(withoutSetupErrors(b).rows).rows;
  for (const field of opts.by ?? []) {
    const ga = splitByGroup(ua, field);
    const gb = splitByGroup(ub, field);
    const keys = [...new Set([...ga.keys(), ...gb.keys()])].sort(compareIds);
    out[field] = Object.fromEntries(keys.map((key) => [key, compareRows(ga.get(key) ?? [], gb.get(key) ?? [], opts)]));
  }
  return out;
}

/** Returns the paired delta report of `a` (before) vs `b` (after): the JSON of `t2s delta --json`. */
export function pairedDelta(a: readonly StatRow[], b: readonly StatRow[], opts: DeltaOptions = {}): DeltaReport {
  const overall = compareRows(a, b, opts);
  const by: Record<string, Record<string, DeltaStats>> = {};
  for (const [field, groups] of Object.entries(compareGroups(a, b, opts))) {
    by[field] = Object.fromEntries(Object.entries(groups).map(([key, detail]) => [key, detail.stats]));
  }
  return { ...overall.stats, by };
}
