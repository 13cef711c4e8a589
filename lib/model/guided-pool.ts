/**
 * The threads guided decoding runs in (guided-worker.mjs), one pair per tokenizer: a sandbox that compiles
 * every guide it has not seen before, under a time limit, and a host that compiles only guides the sandbox
 * passed and runs their matchers (each token's bitmask and advance).
 *
 * Why two, and why the matchers live off the sampling thread: web-xgrammar 0.1.27 cannot serialize a
 * compiled grammar, so the grammar must be built in the instance that runs its matchers, and building one
 * costs 0.1-1 s for an ordinary schema at a 152k vocabulary (tens of seconds for a hostile one). Built on
 * the engine's thread, that time stops /health and every stream. Built in the host directly, a hostile
 * schema that breaks the WASM instance (a stack overflow, an abort) would fail every stream whose matcher
 * lives there. So a guide is first compiled in the sandbox, which holds nothing else: a failure or a
 * timeout there costs only that request, and the sandbox is thrown away and started afresh. The host then
 * builds the proven guide (one more compile of a cost already measured) and its matchers answer one message
 * per token: the advance by the sampled token carries the next mask back. A host that fails anyway is
 * replaced too, failing only the rows whose matchers it held.
 */
import { existsSync } from "node:fs";
import { Worker } from "node:worker_threads";
import { T2sError } from "../core/errors.js";
import { kitPath } from "../core/paths.js";

/** The vocabulary as XGrammar reads it. */
export interface GrammarVocab {
  tokens: string[];
  type: string;
  vocabSize: number;
  eosIds: number[];
}

/** Grammars a host keeps compiled (least recently used out); a sandbox keeps none. */
const GRAMMARS_KEPT = 64;

interface Job {
  resolve: (reply: Record<string, unknown>) => void;
  reject: (e: unknown) => void;
}

/** A failure of the grammar engine itself (its instance is no longer trusted). */
class EngineFailure extends Error {}

/** One worker thread and its XGrammar instance; `broken` once it failed, after which it takes no work. */
class GrammarWorker {
  private readonly worker: Worker;
  private readonly jobs = new Map<number, Job>();
  private next = 0;
  readonly ready: Promise<void>;
  broken = false;

  constructor(role: "sandbox" | "host", vocab: GrammarVocab, script: string) {
    this.worker = new Worker(script, {
      workerData: { role, packageJson: kitPath("package.json"), ...vocab, grammarsKept: GRAMMARS_KEPT },
      execArgv: [],
      // XGrammar prints its FATAL checks and aborts to stderr; the error the request gets says enough. The
      // worker discards its own output (guided-worker.mjs), and these streams are never read: a parent
      // reading a worker's stdout or stderr keeps its process alive for as long as that worker lives
      stdout: true,
      stderr: true,
    });
    this.ready = new Promise((resolve, reject) => {
      this.worker.once("message", (m: { ready?: boolean }) => {
        if (!m.ready) return reject(new EngineFailure("the grammar worker did not start"));
        this.worker.on("message", (reply: Record<string, unknown>) => this.answer(reply));
        this.idle();
        resolve();
      });
      const down = (e: unknown) => {
        this.broken = true;
        const failure = new EngineFailure(e instanceof Error ? e.message : String(e));
        reject(failure);
        for (const j of this.jobs.values()) j.reject(failure);
        this.jobs.clear();
      };
      this.worker.once("error", down);
      this.worker.once("exit", (code) => down(new Error(`the grammar worker exited (code ${code})`)));
    });
    // a worker that fails to start is reported by the first call that waits for it
    this.ready.catch(() => undefined);
  }

  private idle(): void {
    // a worker with nothing to do must not keep the process alive; one with work must
    if (this.jobs.size === 0) this.worker.unref();
  }

  private answer(reply: Record<string, unknown>): void {
    const job = this.jobs.get(reply.id as number);
    if (!job) return;
    this.jobs.delete(reply.id as number);
    this.idle();
    if (typeof reply.error === "string") {
      this.broken = true;
      job.reject(new EngineFailure(reply.error));
    } else job.resolve(reply);
  }

  /** Sends one operation and resolves with its reply (rejects with an EngineFailure when the instance failed). */
  async call(msg: Record<string, unknown>): Promise<Record<string, unknown>> {
    await this.ready;
    if (this.broken) throw new EngineFailure("the grammar worker failed earlier");
    const id = ++this.next;
    return new Promise((resolve, reject) => {
      this.jobs.set(id, { resolve, reject });
      this.worker.ref();
      this.worker.postMessage({ ...msg, id });
    });
  }

  /** A message that needs no answer (closing a matcher). */
  post(msg: Record<string, unknown>): void {
    if (!this.broken) void this.ready.then(() => this.worker.postMessage({ ...msg, id: 0 }), () => undefined);
  }

  terminate(): void {
    this.broken = true;
    void this.worker.terminate();
  }
}

/** The sandbox's verdict on a guide compiled for the first time. */
export type Verdict = { ok: true } | { ok: false; reason: "timeout" | "failed" | "no_first_token"; message?: string };

/** A matcher in the host: each advance returns the next mask. */
export interface RemoteMatcher {
  mask: Int32Array | null;
  terminated: boolean;
  advance(token: number): Promise<boolean>;
  close(): void;
}

/** The sandbox and host threads of one vocabulary. */
export class GrammarPool {
  private sandbox: GrammarWorker | null = null;
  private host: GrammarWorker | null = null;
  /** Sandbox checks run one at a time, in arrival order. */
  private queue: Promise<unknown> = Promise.resolve();

  constructor(private readonly vocab: GrammarVocab) {}

  private script(): string {
    const script = kitPath("lib", "model", "guided-worker.mjs");
    if (!existsSync(script)) throw new T2sError("guided_unavailable", `guided decoding needs ${script}, which this installation lacks`);
    return script;
  }

  /**
   * Compiles a guide in the sandbox, at most `timeoutMs` once the sandbox is ready, and says whether its
   * grammar is usable. A sandbox that failed or ran out of time is discarded. `signal` skips a check whose
   * request went away while it waited.
   */
  check(guide: unknown, terminateAtEnd: boolean, timeoutMs: number, signal?: AbortSignal): Promise<Verdict> {
    const run = async (): Promise<Verdict> => {
      if (signal?.aborted) throw new T2sError("cancelled", "the request went away before its schema was compiled");
      if (!this.sandbox || this.sandbox.broken) this.sandbox = new GrammarWorker("sandbox", this.vocab, this.script());
      const box = this.sandbox;
      try {
        await box.ready;
      } catch (e) {
        throw new T2sError("guided_unavailable", `the grammar engine did not start: ${(e as Error).message}`);
      }
      let timer: NodeJS.Timeout | undefined;
      const timedOut = new Promise<"timeout">((resolve) => (timer = setTimeout(() => resolve("timeout"), timeoutMs)));
      try {
        const reply = await Promise.race([box.call({ op: "check", guide: JSON.stringify(guide), terminateAtEnd }), timedOut]);
        if (reply === "timeout") {
          box.terminate();
          return { ok: false, reason: "timeout" };
        }
        return reply.startsOk ? { ok: true } : { ok: false, reason: "no_first_token" };
      } catch (e) {
        box.terminate();
        if (e instanceof EngineFailure) return { ok: false, reason: "failed", message: e.message };
        throw e;
      } finally {
        clearTimeout(timer);
      }
    };
    const result = this.queue.then(run, run);
    this.queue = result.catch(() => undefined);
    return result;
  }

  /** A matcher of a proven guide in the host (started, or replaced after a failure, on demand). */
  async open(key: string, guide: unknown, terminateAtEnd: boolean): Promise<RemoteMatcher> {
    if (!this.host || this.host.broken) this.host = new GrammarWorker("host", this.vocab, this.script());
    const host = this.host;
    const fail = (e: unknown): never => {
      if (e instanceof EngineFailure) {
        host.terminate();
        throw new T2sError("guided_unavailable", `the grammar engine failed (${e.message}); it was restarted, so retry the request`);
      }
      throw e;
    };
    const opened = await host.call({ op: "open", key, guide: JSON.stringify(guide), terminateAtEnd }).catch(fail);
    const id = opened.matcher as number;
    let closed = false;
    const matcher: RemoteMatcher = {
      mask: (opened.mask as Int32Array | null) ?? null,
      terminated: opened.terminated === true,
      advance: async (token: number) => {
        if (closed) return false;
        const r = await host.call({ op: "accept", matcher: id, token }).catch(fail);
        matcher.mask = (r.mask as Int32Array | null) ?? null;
        matcher.terminated = r.terminated === true;
        return r.ok === true;
      },
      close: () => {
        if (closed) return;
        closed = true;
        host.post({ op: "close", matcher: id });
      },
    };
    return matcher;
  }
}
