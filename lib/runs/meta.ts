/**
 * Run metadata: a sidecar `<rows>.meta.json` holding what makes two runs comparable (policy, sampling,
 * prompt hash, kit version, tasks hash, style). A resumed run must match it, so the rows of one file
 * never mix two different experiments.
 */
import { createHash } from "node:crypto";
import { existsSync, readFileSync } from "node:fs";
import { writeFileAtomic } from "../core/files.js";
import { resolve } from "node:path";
import { fileSha256 } from "../db/copies.js";
import { T2sError } from "../core/errors.js";
import type { Task } from "../tasks/types.js";

export interface RunMeta {
  run_id: string;
  created_at: string;
  kit_version: string;
  policy: string;
  model: string | null;
  adapter: string | null;
  style: string;
  protocol: string | null;
  sampling: { temperature: number | null; top_p: number | null; max_tokens: number | null; seed: number };
  max_tool_calls: number | null;
  max_context_tokens: number | null;
  tool_output: { max_rows: number; max_chars: number; mode: string } | null;
  /** Context padding (benchmark --pad-context, --pad-seed): prompt tokens each opening is padded to and
   * the seed of its queries; absent or null when the openings were not padded. */
  padding?: RunPadding | null;
  prompt_hash: string;
  tasks_hash: string;
  tasks_file: string | null;
  /** sha256 of each database the rows ran against, by db_id (what `t2s db hash` prints); absent in older sidecars. */
  db_sha256?: Record<string, string>;
  /** How an in-process model's linear layers sampled ("int8"), null at the weights' precision; absent in older sidecars. */
  quantization?: string | null;
  /** Samples per task asked for by the latest run (may grow on resume). */
  k: number;
  /** Differences a run was told to accept with --force, in order. */
  forced?: string[];
  /** How answers were graded, when not by the kit's defaults alone: the tasks' dialects (count per dialect)
   * and the run's grading options. Absent for a run of kit-dialect tasks on default options. */
  grading?: { dialects: Record<string, number>; dialect: string | null; distinct: string; max_rows: number | null };
}

/** A run's context padding (benchmark --pad-context, --pad-seed; lib/episode/padding.ts). */
export interface RunPadding {
  /** Prompt tokens each opening is padded to. */
  tokens: number;
  /** Seed of the padding queries' order; each task draws from its own stream. */
  seed: number;
}

/** The grading options a run may set (benchmark --dialect, --distinct, --max-rows). */
export interface RunGrading {
  dialect?: "sqlite" | "spider";
  distinct?: "keep" | "ignore";
  max_rows?: number;
}

/** The `grading` entry of a run's metadata, or nothing when the run grades by the kit's defaults. */
export function gradingMeta(tasks: Pick<Task, "dialect">[], g: RunGrading = {}): Pick<RunMeta, "grading"> {
  const dialects: Record<string, number> = {};
  for (const t of tasks) if (t.dialect && t.dialect !== "sqlite") dialects[t.dialect] = (dialects[t.dialect] ?? 0) + 1;
  if (Object.keys(dialects).length === 0 && g.dialect === undefined && (g.distinct ?? "keep") === "keep" && g.max_rows === undefined) return {};
  return { grading: { dialects, dialect: g.dialect ?? null, distinct: g.distinct ?? "keep", max_rows: g.max_rows ?? null } };
}

/** The sidecar path of a rows file. */
export function metaPath(rowsPath: string): string {
  return `${rowsPath}.meta.json`;
}

/** A short sha256 over the tasks' identity and gold queries (order-independent). */
export function tasksHash(tasks: Pick<Task, "id" | "question" | "gold_sql" | "db_id">[]): string {
  const lines = tasks.map((t) => JSON.stringify([t.id, t.db_id, t.question, t.gold_sql])).sort();
  return createHash("sha256").update(lines.join("\n")).digest("hex").slice(0, 16);
}

const CHECKED: Array<[string, (m: RunMeta) => unknown]> = [
  ["policy", (m) => m.policy],
  ["adapter", (m) => m.adapter],
  ["quantization", (m) => m.quantization ?? null],
  ["style", (m) => m.style],
  ["protocol", (m) => m.protocol],
  ["temperature", (m) => m.sampling.temperature],
  ["top_p", (m) => m.sampling.top_p],
  ["max_tokens", (m) => m.sampling.max_tokens],
  ["seed", (m) => m.sampling.seed],
  ["max_tool_calls", (m) => m.max_tool_calls],
  ["max_context_tokens", (m) => m.max_context_tokens],
  ["tool_output", (m) => m.tool_output],
  ["padding", (m) => m.padding ?? null],
  ["prompt_hash", (m) => m.prompt_hash],
  ["tasks_hash", (m) => m.tasks_hash],
  ["kit_version", (m) => m.kit_version],
  ["grading", (m) => m.grading],
];

/** The fields on which two runs differ, as "field: old -> new" strings (empty when comparable). */
export function metaDifferences(before: RunMeta, now: RunMeta): string[] {
  const out: string[] = [];
  for (const [name, get] of CHECKED) {
    const a = JSON.stringify(get(before) ?? null);
    const b = JSON.stringify(get(now) ?? null);
    if (a !== b) out.push(`${name}: ${a} -> ${b}`);
  }
  // a database both runs used must be the same file; a sidecar from before hashes were kept knows none
  for (const [db, sha] of Object.entries(now.db_sha256 ?? {})) {
    const old = before.db_sha256?.[db];
    if (old !== undefined && old !== sha) out.push(`db_sha256 of ${db}: ${old.slice(0, 12)}... -> ${sha.slice(0, 12)}... (the database changed)`);
  }
  return out;
}

/** The sha256 of each database file `tasks` run on, by db_id (each file read once; a file that is not there is left out, its episodes fail on their own). */
export function databaseHashes(tasks: Pick<Task, "db_id" | "db_path">[]): Record<string, string> {
  const byPath = new Map<string, string>();
  const out: Record<string, string> = {};
  for (const t of tasks) {
    const path = resolve(t.db_path);
    let sha = byPath.get(path);
    if (sha === undefined) {
      if (!existsSync(path)) continue;
      byPath.set(path, (sha = fileSha256(path)));
    }
    out[t.db_id] = sha;
  }
  return Object.fromEntries(Object.entries(out).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)));
}

/** Reads a sidecar, or returns null when there is none; throws T2sError("bad_meta") when it is unreadable. */
export function readMeta(path: string): RunMeta | null {
  if (!existsSync(path)) return null;
  try {
    return JSON.parse(readFileSync(path, "utf8")) as RunMeta;
  } catch (e) {
    throw new T2sError("bad_meta", `${path} is not valid JSON (${(e as Error).message}); move it away to start the metadata afresh`);
  }
}

/** Writes a sidecar atomically (temp file + rename), so a crash never leaves half a file. */
export function writeMeta(path: string, meta: RunMeta): void {
  writeFileAtomic(path, JSON.stringify(meta, null, 2) + "\n");
}

/** The sidecar of a rows file as written (`<rows>.meta.json`; for a gzipped copy `x.jsonl.gz`, also `x.jsonl.meta.json`), or null when it has none. */
export function findMeta(rowsPath: string): RunMeta | null {
  const plain = metaPath(rowsPath);
  if (existsSync(plain)) return readMeta(plain);
  return rowsPath.endsWith(".gz") ? readMeta(metaPath(rowsPath.slice(0, -3))) : null;
}

/**
 * What makes two runs' rows incomparable task by task although both files read fine: another database
 * (db_sha256 of a db_id both name), another task set (tasks_hash) or other prompt templates (prompt_hash).
 * Returns one phrase per difference; a side without a sidecar is said too, since nothing can be checked.
 */
export function setupDifferences(a: { path: string; meta: RunMeta | null }, b: { path: string; meta: RunMeta | null }): string[] {
  const out: string[] = [];
  for (const side of [a, b]) if (!side.meta) out.push(`${side.path} has no .meta.json sidecar, so its database, tasks and prompts cannot be checked`);
  if (!a.meta || !b.meta) return out;
  const ma = a.meta;
  const mb = b.meta;
  for (const db of Object.keys(ma.db_sha256 ?? {}).sort()) {
    const ha = ma.db_sha256![db];
    const hb = mb.db_sha256?.[db];
    if (hb !== undefined && ha !== hb) out.push(`database ${db} differs (db_sha256 ${ha.slice(0, 12)} vs ${hb.slice(0, 12)})`);
  }
  if (ma.tasks_hash !== mb.tasks_hash) out.push(`task sets differ (tasks_hash ${ma.tasks_hash} vs ${mb.tasks_hash})`);
  if (ma.prompt_hash !== mb.prompt_hash) out.push(`prompt templates differ (prompt_hash ${ma.prompt_hash} vs ${mb.prompt_hash})`);
  return out;
}
