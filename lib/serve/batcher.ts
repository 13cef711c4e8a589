/**
 * Dynamic batching: requests that arrive while the model is busy, or within a few milliseconds of each
 * other, are run as one generation batch (rows of the same served model share one forward pass and a
 * common prompt prefix is computed once). One batch runs at a time; the next one starts with whatever
 * queued meanwhile.
 */
import { generate, type Generation, type GenerationRequest } from "../model/generate.js";
import type { CausalLM } from "../model/model.js";

export interface BatchJob {
  model: CausalLM;
  rows: GenerationRequest[];
  /** Receives text pieces of this job's rows (row index within the job). */
  onText?: (row: number, delta: string) => void;
}

interface Pending extends BatchJob {
  resolve: (g: Generation[]) => void;
  reject: (e: unknown) => void;
}

export interface BatcherOptions {
  /** How long to wait for more requests after the first one arrives (default 5 ms). */
  windowMs?: number;
  /** Rows per batch at most (default 64). */
  maxRows?: number;
}

export class Batcher {
  private queue: Pending[] = [];
  private running = false;
  private timer: NodeJS.Timeout | null = null;
  private readonly windowMs: number;
  private readonly maxRows: number;
  /** Sizes of the batches run so far (rows), for tests and logs. */
  readonly batchSizes: number[] = [];

  constructor(opts: BatcherOptions = {}) {
    this.windowMs = opts.windowMs ?? 5;
    this.maxRows = opts.maxRows ?? 64;
  }

  /** Queues a job and returns its generations (in row order) once its batch has run. */
  submit(job: BatchJob): Promise<Generation[]> {
    return new Promise((resolve, reject) => {
      this.queue.push({ ...job, resolve, reject });
      this.schedule();
    });
  }

  private schedule(): void {
    if (this.running || this.timer) return;
    this.timer = setTimeout(() => {
      this.timer = null;
      void this.runNext();
    }, this.windowMs);
  }

  private async runNext(): Promise<void> {
    if (this.running || this.queue.length === 0) return;
    this.running = true;
    const model = this.queue[0].model;
    const batch: Pending[] = [];
    let rows = 0;
    this.queue = this.queue.filter((p) => {
      if (p.model !== model || (batch.length > 0 && rows + p.rows.length > this.maxRows)) return true;
      batch.push(p);
      rows += p.rows.length;
      return false;
    });
    const owners: { job: number; row: number }[] = [];
    batch.forEach((p, j) => p.rows.forEach((_, r) => owners.push({ job: j, row: r })));
    this.batchSizes.push(rows);
    try {
      const streaming = batch.some((p) => p.onText);
      const out = await generate(model, batch.flatMap((p) => p.rows), {
        onText: streaming
          ? (i, delta) => {
              const o = owners[i];
              batch[o.job].onText?.(o.row, delta);
            }
          : undefined,
      });
      let k = 0;
      for (const p of batch) {
        p.resolve(out.slice(k, k + p.rows.length));
        k += p.rows.length;
      }
    } catch (e) {
      for (const p of batch) p.reject(e);
    } finally {
      this.running = false;
      if (this.queue.length) this.schedule();
    }
  }
}
