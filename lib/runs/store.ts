/**
 * The rows store: an append-only jsonl file, one line per episode, written with one write call as each
 * episode lands. A torn last line (the writer killed mid-write) is cut off when the store opens, so the
 * next append starts on a clean line and the file stays valid jsonl; a malformed line in the middle is an
 * error, never silently dropped or rewritten. A setup-error row (a request the server refused) stays in the
 * file as the record of the refusal but does not count as done: the sample runs again on resume, and its
 * graded row then stands for it.
 */
import { appendFileSync, existsSync, readFileSync, truncateSync } from "node:fs";
import { T2sError } from "../core/errors.js";
import { appendJsonl, parseJsonl } from "../core/jsonl.js";
import { isSetupError } from "../stats/rows.js";
import { rowKey, type RolloutRow } from "./row.js";

export interface OpenedStore {
  store: RowsStore;
  /** Bytes of a torn last line that were cut off. */
  tornBytes: number;
  /** Rows whose (eval run, task, sample) appeared earlier in the file; ignored. */
  duplicates: number;
}

/** Repairs the end of the file and returns how many torn bytes were removed. */
function repairTail(path: string): number {
  const buf = readFileSync(path);
  if (buf.length === 0 || buf[buf.length - 1] === 0x0a) return 0;
  const lastNl = buf.lastIndexOf(0x0a);
  const tail = buf.subarray(lastNl + 1).toString("utf8");
  try {
    JSON.parse(tail);
    // a complete record whose newline never made it to disk: finish the line instead of dropping it
    appendFileSync(path, "\n");
    return 0;
  } catch {
    truncateSync(path, lastNl + 1);
    return buf.length - (lastNl + 1);
  }
}

/** The complete lines (rows, setup errors among them) of the rows file at `path` now; read only, nothing repaired. */
export function completeRows(path: string): number {
  if (!existsSync(path)) return 0;
  const buf = readFileSync(path);
  let n = 0;
  for (let i = buf.indexOf(0x0a); i !== -1; i = buf.indexOf(0x0a, i + 1)) n++;
  return n;
}

export class RowsStore {
  private readonly keys = new Set<string>();
  /** Setup-error rows in the file (not in `rows`, not done). */
  setupErrors = 0;
  /** Why an append failed; set once, after which the store takes no more rows. */
  private failure: string | null = null;
  /** The graded rows, one per (eval run, task, sample), in file order. */
  private constructor(readonly path: string, readonly rows: RolloutRow[]) {}

  /** Opens (or creates on first append) the rows file at `path`, repairing a torn tail. */
  static open(path: string): OpenedStore {
    if (!existsSync(path)) return { store: new RowsStore(path, []), tornBytes: 0, duplicates: 0 };
    const tornBytes = repairTail(path);
    const { records } = parseJsonl<RolloutRow>(readFileSync(path, "utf8"), path);
    const store = new RowsStore(path, []);
    let duplicates = 0;
    records.forEach((r, i) => {
      if (!r || typeof r !== "object" || typeof r.task_id !== "string" || !Number.isInteger(r.sample)) {
        throw new T2sError("bad_rows", `${path}: line ${i + 1} is not a rollout row (needs task_id and sample)`);
      }
      if (isSetupError(r)) {
        store.setupErrors++;
        return;
      }
      const key = rowKey(String(r.eval_run ?? ""), r.task_id, r.sample);
      if (store.keys.has(key)) {
        duplicates++;
        return;
      }
      store.keys.add(key);
      store.rows.push(r);
    });
    return { store, tornBytes, duplicates };
  }

  /** True when a graded row (eval run, task, sample) is already stored. */
  has(evalRun: string, taskId: string, sample: number): boolean {
    return this.keys.has(rowKey(evalRun, taskId, sample));
  }

  /**
   * Appends one row as one line and flushes it to the OS; refuses a duplicate (eval run, task, sample).
   * A failed write (disk full, I/O error) cuts the file back to where the row started and closes the
   * store to appends: a row is in the file whole or not at all, and no later row is written after a gap.
   */
  append(row: RolloutRow, opts: { fsync?: boolean } = {}): void {
    if (this.failure) throw new T2sError("write_failed", `${this.path}: no more rows are written after a failed append (${this.failure}); run again to resume`);
    const key = rowKey(row.eval_run, row.task_id, row.sample);
    if (this.keys.has(key)) throw new T2sError("duplicate_row", `${this.path} already holds ${row.task_id} sample ${row.sample} of eval run ${row.eval_run}`);
    try {
      // a failed write cuts the file back to where the row started (lib/core/jsonl.ts)
      appendJsonl(this.path, [row], opts);
    } catch (e) {
      this.failure = `${(e as NodeJS.ErrnoException).code ?? "error"}: ${(e as Error).message}`;
      throw new T2sError("write_failed", `${this.path}: could not append a row (${this.failure}); the file keeps its complete rows, and running again resumes once the cause is fixed`);
    }
    if (isSetupError(row)) {
      this.setupErrors++;
      return;
    }
    this.keys.add(key);
    this.rows.push(row);
  }
}
