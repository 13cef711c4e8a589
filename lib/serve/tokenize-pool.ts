/**
 * Tokenization off the HTTP event loop. A prompt is tokenized in one of a few worker threads
 * (tokenize-worker.mjs, built from the model folder's tokenizer files), so a huge prompt never stops
 * /health or the running streams; before that, its UTF-8 size is checked against a bound past which it
 * cannot fit the context whatever it says: `maxPositions x (bytes of the longest token) x 4` (4 covers a
 * normalizer that composes several characters into one), so a 1 MB prompt to a 2k-token model is refused
 * at once instead of being tokenized at all. A model without a folder (a random model in a test) is
 * tokenized in the thread, behind the same bound.
 */
import { existsSync } from "node:fs";
import { Worker } from "node:worker_threads";
import { T2sError } from "../core/errors.js";
import { kitPath } from "../core/paths.js";
import type { ChatTokenizer } from "../model/tokenizer.js";

interface Job {
  resolve: (ids: number[]) => void;
  reject: (e: unknown) => void;
}

interface Slot {
  worker: Worker;
  jobs: Map<number, Job>;
}

/** How many bytes of text one token stands for at most, over the vocabulary (decoded one id at a time). */
export function longestTokenBytes(tok: ChatTokenizer): number {
  let most = 1;
  for (let id = 0; id < tok.vocabSize; id++) most = Math.max(most, Buffer.byteLength(tok.decode([id], { skipSpecialTokens: false })));
  return most;
}

/** The factor over max_positions x longest token that a prompt's UTF-8 size may reach before it is refused untokenized. */
const NORMALIZER_SLACK = 4;

export class TokenizerPool {
  private readonly slots: Slot[] = [];
  private next = 0;
  private closed = false;
  /** Bytes of text a token stands for at most. */
  private tokenBytes = 0;

  private constructor(private readonly tok: ChatTokenizer) {}

  /**
   * A pool for a tokenizer; `dir` is the model folder its files came from (null: tokenize in the thread).
   * Resolves once the workers are ready (they build the tokenizer and measure the longest token).
   */
  static async start(tok: ChatTokenizer, dir: string | null, workers = 2): Promise<TokenizerPool> {
    const pool = new TokenizerPool(tok);
    const script = kitPath("lib", "serve", "tokenize-worker.mjs");
    const usable = dir !== null && existsSync(script) && existsSync(`${dir}/tokenizer.json`) && process.env.T2S_TOKENIZE_WORKERS !== "0";
    if (usable) {
      try {
        await Promise.all(Array.from({ length: Math.max(1, workers) }, () => pool.spawn(script, dir)));
      } catch {
        // a worker that cannot start (an unusual bundle): tokenize in the thread, behind the same bound
        await pool.close();
        pool.closed = false;
        pool.slots.length = 0;
      }
    }
    pool.tokenBytes = longestTokenBytes(tok);
    return pool;
  }

  private spawn(script: string, dir: string): Promise<void> {
    return new Promise((resolve, reject) => {
      const worker = new Worker(script, { workerData: { dir }, execArgv: [] });
      const slot: Slot = { worker, jobs: new Map() };
      worker.on("message", (m: { ready?: boolean; id?: number; ids?: Int32Array; error?: string }) => {
        if (m.ready) {
          this.slots.push(slot);
          // an idle worker must not keep the process alive
          worker.unref();
          return resolve();
        }
        const job = slot.jobs.get(m.id!);
        if (!job) return;
        slot.jobs.delete(m.id!);
        if (m.error !== undefined) job.reject(new T2sError("usage", `the prompt cannot be tokenized: ${m.error}`));
        else job.resolve(Array.from(m.ids!));
      });
      worker.on("error", (e) => {
        reject(e);
        for (const j of slot.jobs.values()) j.reject(e);
        slot.jobs.clear();
        const i = this.slots.indexOf(slot);
        if (i >= 0) this.slots.splice(i, 1);
      });
    });
  }

  /** Whether prompts go to worker threads (false: tokenized in the thread). */
  get threaded(): boolean {
    return this.slots.length > 0;
  }

  /** UTF-8 bytes of text past which a prompt cannot fit `maxPositions` tokens. */
  maxBytes(maxPositions: number): number {
    return maxPositions * this.tokenBytes * NORMALIZER_SLACK;
  }

  /** Throws context_length_exceeded when `bytes` of text cannot fit in `maxPositions` tokens. */
  checkBytes(bytes: number, maxPositions: number): void {
    if (bytes > this.maxBytes(maxPositions)) {
      throw new T2sError("context_length_exceeded", `the prompt is ${bytes} bytes of text, more than ${maxPositions} tokens can hold (this model's maximum context length is ${maxPositions} tokens); it was refused without being tokenized`);
    }
  }

  /** Token ids of `text`, after the byte bound for `maxPositions`. */
  encode(text: string, opts: { addSpecialTokens: boolean; maxPositions: number }): Promise<number[]> {
    if (this.closed) return Promise.reject(new T2sError("cancelled", "the server is stopping"));
    try {
      this.checkBytes(Buffer.byteLength(text), opts.maxPositions);
    } catch (e) {
      return Promise.reject(e);
    }
    if (!this.slots.length) return Promise.resolve(this.tok.encode(text, { addSpecialTokens: opts.addSpecialTokens }));
    // the worker with the fewest jobs in flight (a huge prompt on one leaves the other for short ones)
    let slot = this.slots[this.next++ % this.slots.length];
    for (const s of this.slots) if (s.jobs.size < slot.jobs.size) slot = s;
    const id = this.next;
    return new Promise((resolve, reject) => {
      slot.jobs.set(id, { resolve, reject });
      slot.worker.postMessage({ id, text, addSpecialTokens: opts.addSpecialTokens });
    });
  }

  async close(): Promise<void> {
    this.closed = true;
    for (const s of this.slots.splice(0)) {
      for (const j of s.jobs.values()) j.reject(new T2sError("cancelled", "the server is stopping"));
      await s.worker.terminate();
    }
  }
}
